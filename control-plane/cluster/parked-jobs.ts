import type { Job, JobCarrier } from '../dispatch/job';

/**
 * Relayed jobs a peer sent back unstarted that have nowhere to go yet, each held until this
 * server's next read of its peers (a registry heartbeat) or at most `maxParkMs`, then tried once
 * more. Why: the replica they need may have just joined a peer this server has not read yet (a
 * cold start's replica, reported by the server it joined, released the job's wait on the peer
 * that sent it back before this server's own view caught up). A parked job's client can still
 * leave: its cancel ends it at once as `canceled`, and nothing ran, so nothing is metered.
 */
export class ParkedJobs {
  private readonly waiting = new Set<() => void>();

  constructor(private readonly maxParkMs: number) {}

  /** Holds `job` until `retry` (the next peers' read) or `giveUp` (at `maxParkMs`), whichever comes first. */
  park(job: Job, retry: () => void, giveUp: () => void): void {
    const next = () => {
      settle();
      if (!job.finished) retry();
    };
    const timer = setTimeout(() => {
      settle();
      if (!job.finished) giveUp();
    }, this.maxParkMs);
    timer.unref();
    const settle = () => {
      clearTimeout(timer);
      this.waiting.delete(next);
    };
    job.carrier = new ParkedCarrier(settle);
    this.waiting.add(next);
  }

  /** The peers were read again: every parked job is tried once more. */
  peersRead(): void {
    if (this.waiting.size === 0) return;
    for (const next of [...this.waiting]) next();
  }

  /** Jobs parked now. */
  get size(): number {
    return this.waiting.size;
  }
}

/** Where a parked job is: on no replica. A cancel ends it here, as its carrier would after a cancel. */
class ParkedCarrier implements JobCarrier {
  readonly replicaId = '';

  constructor(private readonly settle: () => void) {}

  cancelJob(job: Job, reason: string): void {
    this.settle();
    if (job.finished) return;
    job.finished = true;
    job.listener.onFailed({ code: 'canceled', message: reason || 'canceled while it waited for a replica', engineStatus: 0, engineBody: null, usage: undefined });
  }

  creditJob(): void {}
}
