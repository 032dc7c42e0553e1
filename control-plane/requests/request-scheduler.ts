import type { Logger } from 'pino';
import { AppError } from '../errors/app-error';
import type { SlotHold } from '../dispatch/agent-connection';
import type { Dispatcher } from '../dispatch/dispatcher';
import type { ClusterNotifier } from '../events/cluster-notifier';
import type { ControlPlaneEvents } from '../events/control-plane-events';
import { takesWork } from '../placement/filters';
import { mostFree } from '../placement/slots';
import type { MediaJobs, MediaOutcome } from './media-jobs';
import type { RequestRecord } from './request-record.entity';
import type { RequestRecords } from './request-records';

export interface RequestSchedulerOptions {
  /** A running job's server renews its claim this often… */
  leaseMs: number;
  /** …and this often looks for overdue records (lost leases, deadlines, queue expiry) and missed wake-ups. */
  sweepIntervalMs: number;
  /** Longest wait in the queue before a record fails with `model_timeout`. */
  queueTtlMs: number;
}

/**
 * Moves queued request records onto free replicas of this server. Woken, not polling: by a
 * submission (here, or on another server through NOTIFY), by a replica joining or finishing a
 * job; a slow sweep is only the safety net for a missed wake-up and the guard of every
 * record's terminal state (a server that died mid-job, a deadline, an expired queue entry).
 */
export class RequestScheduler {
  /** Deployments that may have queued work; wake-ups for others (text deployments) cost nothing. */
  private readonly pending = new Set<string>();
  private readonly claiming = new Map<string, { again: boolean }>();
  private sweepTimer: NodeJS.Timeout | undefined;
  private sweeping: Promise<void> | null = null;
  private stopped = false;

  constructor(
    private readonly records: RequestRecords,
    private readonly dispatcher: Dispatcher,
    private readonly jobs: MediaJobs,
    private readonly notifier: Pick<ClusterNotifier, 'publish' | 'on' | 'onReset' | 'instanceId'>,
    private readonly events: ControlPlaneEvents,
    private readonly options: RequestSchedulerOptions,
    private readonly logger: Logger,
    /** The clock in milliseconds leases are given by. */
    private readonly now: () => number = Date.now,
  ) {}

  start(): void {
    this.notifier.on('request-queued', (deploymentId) => this.queued(deploymentId, false));
    // Notifications sent while the listening connection was down are lost: sweep now, not at the next interval.
    this.notifier.onReset(() => void this.sweep());
    // A record put back in the queue (refused by a draining agent) is claimable again.
    this.events.on('requestUpdated', (record) => {
      if (record.status === 'queued') this.queued(record.deploymentId, false);
    });
    this.dispatcher.onCapacity((deploymentId) => this.wake(deploymentId));
    this.sweepTimer = setInterval(() => void this.sweep(), this.options.sweepIntervalMs);
    this.sweepTimer.unref();
    void this.sweep();
  }

  /** Claims nothing more and stops sweeping (shutdown: before agents drain, so queued work stays queued). */
  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.sweepTimer);
    await this.sweeping;
  }

  /** A record was queued (committed): claim it here if a replica is free, and tell the other servers. */
  queued(deploymentId: string, announce = true): void {
    this.pending.add(deploymentId);
    if (announce) this.notifier.publish('request-queued', deploymentId);
    this.wake(deploymentId);
  }

  /**
   * A sync call: a replica with a free slot must exist now (else 429 `replica_saturated`, or
   * 503 `no_pod_available` when none is ready). The slot is reserved until `runNow` puts the
   * job on it, or `releaseSlot` gives it back.
   */
  reserveSlot(deploymentId: string): SlotHold {
    const connections = this.dispatcher.connections(deploymentId);
    const connection = mostFree(connections);
    if (connection) return connection.reserveSlot();
    if (connections.some(takesWork)) throw new AppError('replica_saturated', 'every replica of this deployment is at its concurrency limit; retry shortly or submit with ?async=true', { retryAfterSeconds: 2 });
    throw new AppError('no_pod_available', 'no replica of this deployment is ready (starting, paused or scaled away); retry shortly', { retryAfterSeconds: 10 });
  }

  /** The claim a job started on this server holds (sync calls start without the queue). */
  lease(): { leaseOwner: string; leaseExpiresAt: Date } {
    return { leaseOwner: this.notifier.instanceId, leaseExpiresAt: new Date(this.now() + this.options.leaseMs) };
  }

  releaseSlot(slot: SlotHold): void {
    slot.release();
    this.dispatcher.released(slot.connection);
  }

  /** Runs an already-inserted `running` record on the reserved slot (sync calls). */
  runNow(record: RequestRecord, slot: SlotHold): Promise<MediaOutcome> {
    return this.jobs.start(record, slot);
  }

  wake(deploymentId: string): void {
    if (this.stopped || !this.pending.has(deploymentId)) return;
    const current = this.claiming.get(deploymentId);
    if (current) {
      current.again = true;
      return;
    }
    const state = { again: false };
    this.claiming.set(deploymentId, state);
    this.claimLoop(deploymentId)
      .catch((error) => this.logger.error({ err: error, deploymentId }, 'claiming queued requests failed'))
      .finally(() => {
        this.claiming.delete(deploymentId);
        if (!state.again) return;
        // Woken while claiming: the loop may have just found the queue empty and forgotten
        // the deployment, so remember it again before looking once more.
        this.pending.add(deploymentId);
        this.wake(deploymentId);
      });
  }

  private async claimLoop(deploymentId: string): Promise<void> {
    while (!this.stopped) {
      // A media job never waits in an agent's queue: it starts on the replica with the most free slots, or stays queued here.
      const connection = mostFree(this.dispatcher.connections(deploymentId));
      if (!connection) return;
      // The slot stays reserved until the job is on the agent (MediaJobs.start releases it),
      // so a second claim never counts the same free slot.
      const slot = connection.reserveSlot();
      let record: RequestRecord | null;
      try {
        record = await this.records.claim(deploymentId, {
          replicaId: connection.replicaId, leaseOwner: this.notifier.instanceId, leaseMs: this.options.leaseMs,
          timeoutMs: (candidate) => this.jobs.timeoutMs(candidate), queueTtlMs: this.options.queueTtlMs,
        });
      } catch (error) {
        slot.release();
        throw error;
      }
      if (!record) {
        slot.release();
        this.pending.delete(deploymentId);
        return;
      }
      // The outcome is recorded by the job itself; nobody waits on an async record here.
      void this.jobs.start(record, slot);
    }
  }

  /** The safety net: renew our leases, end overdue records, and wake deployments with queued work. */
  private sweep(): Promise<void> {
    if (this.sweeping || this.stopped) return this.sweeping ?? Promise.resolve();
    this.sweeping = (async () => {
      try {
        await this.records.renewLeases(this.notifier.instanceId, this.jobs.runningIds(), this.options.leaseMs);
        const overdue = await this.records.overdue(this.options.queueTtlMs);
        for (const id of overdue.deadlinePassed) await this.jobs.expire(id, 'model_timeout', 'the job did not finish within its time limit');
        for (const id of overdue.leaseLost) {
          await this.jobs.expire(id, 'pod_crash', 'the server or replica running the job stopped before it finished');
        }
        for (const id of overdue.expiredInQueue) {
          await this.jobs.expire(id, 'model_timeout', `no replica took the job within ${Math.round(this.options.queueTtlMs / 1000)} s of queueing`);
        }
        for (const deploymentId of await this.records.deploymentsWithQueuedWork()) {
          this.pending.add(deploymentId);
          this.wake(deploymentId);
        }
      } catch (error) {
        this.logger.error({ err: error }, 'request sweep failed');
      } finally {
        this.sweeping = null;
      }
    })();
    return this.sweeping;
  }
}
