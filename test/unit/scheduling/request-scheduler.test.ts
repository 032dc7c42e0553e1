/**
 * RequestScheduler: queued media records are claimed only into free slots of this server's
 * replicas (the slot reserved from before the claim until the job is on the agent, released
 * when nothing was claimed or the claim failed); a sync call reserves a slot or is refused
 * with the right code; wake-ups come from submissions, peers, requeues and freed slots, and
 * one arriving mid-claim is never lost; the sweep renews leases and ends overdue records with
 * the right code. Records, media jobs and the cluster notifier are in-memory fakes; the
 * Dispatcher and its agents are real.
 */
import type { AgentConnection, SlotHold } from '../../../control-plane/dispatch/agent-connection';
import { Dispatcher } from '../../../control-plane/dispatch/dispatcher';
import type { Job } from '../../../control-plane/dispatch/job';
import type { ClusterNotifier } from '../../../control-plane/events/cluster-notifier';
import { ControlPlaneEvents } from '../../../control-plane/events/control-plane-events';
import type { MediaJobs, MediaOutcome } from '../../../control-plane/requests/media-jobs';
import type { RequestRecord } from '../../../control-plane/requests/request-record.entity';
import type { ClaimOptions, RequestRecords } from '../../../control-plane/requests/request-records';
import { RequestScheduler } from '../../../control-plane/requests/request-scheduler';
import { agent, deferred, events, flush, RecordingListener, recordingLogger, request, thrownCode } from './fakes';

const OPTIONS = { leaseMs: 30_000, sweepIntervalMs: 60_000, queueTtlMs: 3_600_000 };

function record(id: string, deploymentId = 'dep_a', overrides: Partial<RequestRecord> = {}): RequestRecord {
  return { id, deploymentId, modality: 'image', status: 'queued', sync: false, ...overrides } as RequestRecord;
}

/** The request_records table as the scheduler uses it: per-deployment FIFO queues. */
class FakeRecords {
  readonly queues = new Map<string, RequestRecord[]>();
  readonly claims: Array<{ deploymentId: string; options: ClaimOptions; reservedDuringClaim: number[] }> = [];
  readonly renewed: Array<{ owner: string; ids: string[]; leaseMs: number }> = [];
  overdueResult = { leaseLost: [] as string[], deadlinePassed: [] as string[], expiredInQueue: [] as string[] };
  failSweep = false;
  /** Replaces the next claim's answer (a claim still in flight, or one that fails). */
  nextClaim: (() => Promise<RequestRecord | null>) | null = null;
  /** Connections whose `reserved` the claim records while it runs. */
  watched: AgentConnection[] = [];

  enqueue(...records: RequestRecord[]): void {
    for (const queued of records) this.queues.set(queued.deploymentId, [...(this.queues.get(queued.deploymentId) ?? []), queued]);
  }

  async claim(deploymentId: string, options: ClaimOptions): Promise<RequestRecord | null> {
    this.claims.push({ deploymentId, options, reservedDuringClaim: this.watched.map((connection) => connection.reserved) });
    const next = this.nextClaim;
    this.nextClaim = null;
    if (next) return await next();
    const claimed = this.queues.get(deploymentId)?.shift() ?? null;
    if (claimed) claimed.status = 'running';
    return claimed;
  }

  async renewLeases(owner: string, ids: string[], leaseMs: number): Promise<void> {
    this.renewed.push({ owner, ids, leaseMs });
  }

  async overdue(): Promise<typeof this.overdueResult> {
    if (this.failSweep) throw new Error('database unreachable');
    const result = this.overdueResult;
    this.overdueResult = { leaseLost: [], deadlinePassed: [], expiredInQueue: [] };
    return result;
  }

  async deploymentsWithQueuedWork(): Promise<string[]> {
    return [...this.queues].filter(([, queue]) => queue.length > 0).map(([deploymentId]) => deploymentId);
  }
}

/** Media jobs as the scheduler sees them: `start` releases the reservation and puts a job on the agent. */
class FakeJobs {
  readonly started: Array<{ record: RequestRecord; connection: AgentConnection; job: Job; reservedBefore: number }> = [];
  readonly expired: Array<{ id: string; code: string }> = [];

  constructor(private readonly dispatcher: Dispatcher) {}

  timeoutMs(candidate: Pick<RequestRecord, 'modality'>): number {
    return candidate.modality === 'video' ? 1_800_000 : 300_000;
  }

  runningIds(): string[] {
    return this.started.map((running) => running.record.id);
  }

  start(startedRecord: RequestRecord, slot: SlotHold): Promise<MediaOutcome> {
    const { connection } = slot;
    const reservedBefore = connection.reserved;
    slot.release();
    const job = this.dispatcher.dispatchTo(connection, request({ deploymentId: startedRecord.deploymentId, kind: 'JOB_KIND_IMAGE_GENERATION' }), new RecordingListener());
    this.started.push({ record: startedRecord, connection, job, reservedBefore });
    return new Promise(() => {});
  }

  async expire(id: string, code: string): Promise<RequestRecord | null> {
    this.expired.push({ id, code });
    return null;
  }

  /** The agent finished the job of `id`: its slot is free again. */
  complete(id: string): void {
    const running = this.started.find((candidate) => candidate.record.id === id)!;
    running.connection.onJobEvent(events.completed(running.job.id));
  }

  startedIds(): string[] {
    return this.started.map((running) => running.record.id);
  }
}

class FakeNotifier {
  readonly instanceId = 'srv_self';
  readonly published: Array<{ topic: string; payload: string }> = [];
  private readonly handlers = new Map<string, Array<(payload: string) => void>>();
  private readonly resetHandlers: Array<() => void> = [];

  publish(topic: string, payload: string): void {
    this.published.push({ topic, payload });
  }

  on(topic: string, handler: (payload: string) => void): void {
    this.handlers.set(topic, [...(this.handlers.get(topic) ?? []), handler]);
  }

  onReset(handler: () => void): void {
    this.resetHandlers.push(handler);
  }

  /** Another server published `topic`. */
  deliver(topic: string, payload: string): void {
    for (const handler of this.handlers.get(topic) ?? []) handler(payload);
  }

  reset(): void {
    for (const handler of this.resetHandlers) handler();
  }
}

const schedulers: RequestScheduler[] = [];
afterEach(async () => {
  await Promise.all(schedulers.splice(0).map((scheduler) => scheduler.stop()));
});

function world(now?: () => number) {
  const dispatcher = new Dispatcher();
  const records = new FakeRecords();
  const jobs = new FakeJobs(dispatcher);
  const notifier = new FakeNotifier();
  const controlEvents = new ControlPlaneEvents();
  const log = recordingLogger();
  const scheduler = new RequestScheduler(
    records as unknown as RequestRecords, dispatcher, jobs as unknown as MediaJobs,
    notifier as unknown as Pick<ClusterNotifier, 'publish' | 'on' | 'onReset' | 'instanceId'>, controlEvents, OPTIONS, log.logger, now,
  );
  schedulers.push(scheduler);
  const replica = (options: { replicaId?: string; deploymentId?: string; max?: number; busy?: number; draining?: boolean; closed?: boolean } = {}) => {
    const { connection } = agent(dispatcher, { replicaId: options.replicaId, deploymentId: options.deploymentId ?? 'dep_a', maxConcurrency: options.max ?? 1 });
    dispatcher.register(connection);
    for (let index = 0; index < (options.busy ?? 0); index++) {
      dispatcher.dispatchTo(connection, request({ deploymentId: connection.deploymentId }), new RecordingListener());
    }
    connection.draining = options.draining ?? false;
    connection.closed = options.closed ?? false;
    records.watched.push(connection);
    return connection;
  };
  return { dispatcher, records, jobs, notifier, events: controlEvents, log, scheduler, replica };
}

describe('RequestScheduler sync slots', () => {
  test('reserves a slot on the replica with the most free slots', () => {
    const { scheduler, replica } = world();
    replica({ replicaId: 'small', max: 2, busy: 1 });
    const large = replica({ replicaId: 'large', max: 4, busy: 1 });
    expect(scheduler.reserveSlot('dep_a').connection).toBe(large);
    expect(large.reserved).toBe(1);
  });

  test.each<[string, Array<{ max: number; busy: number; draining?: boolean; closed?: boolean }>, string]>([
    ['replica_saturated (429) when every ready replica is at its concurrency', [{ max: 1, busy: 1 }, { max: 2, busy: 2 }], 'replica_saturated'],
    ['replica_saturated when one replica is full and another draining', [{ max: 1, busy: 1 }, { max: 4, busy: 0, draining: true }], 'replica_saturated'],
    ['no_pod_available (503) when no replica is connected', [], 'no_pod_available'],
    ['no_pod_available when every replica is draining', [{ max: 4, busy: 0, draining: true }], 'no_pod_available'],
    ['no_pod_available when every replica is closed', [{ max: 4, busy: 0, closed: true }], 'no_pod_available'],
  ])('refuses with %s', (_name, replicas, code) => {
    const { scheduler, replica } = world();
    for (const spec of replicas) replica(spec);
    expect(thrownCode(() => scheduler.reserveSlot('dep_a'))).toBe(code);
  });

  test('a reserved slot is not offered twice; releasing it offers it again', () => {
    const { scheduler, replica } = world();
    const only = replica({ max: 1 });
    const slot = scheduler.reserveSlot('dep_a');
    expect(thrownCode(() => scheduler.reserveSlot('dep_a'))).toBe('replica_saturated');
    scheduler.releaseSlot(slot);
    expect(only.reserved).toBe(0);
    expect(scheduler.reserveSlot('dep_a').connection).toBe(only);
  });

  test('a released sync slot goes to queued work at once', async () => {
    const { scheduler, replica, records, jobs } = world();
    replica({ max: 1 });
    scheduler.start();
    const slot = scheduler.reserveSlot('dep_a');
    records.enqueue(record('req_1'));
    scheduler.queued('dep_a');
    await flush();
    expect(jobs.startedIds()).toEqual([]);
    scheduler.releaseSlot(slot);
    await flush();
    expect(jobs.startedIds()).toEqual(['req_1']);
  });

  test('runNow starts the record on the reserved replica', () => {
    const { scheduler, replica, jobs } = world();
    replica({ max: 1 });
    const slot = scheduler.reserveSlot('dep_a');
    void scheduler.runNow(record('req_sync', 'dep_a', { sync: true, status: 'running' }), slot);
    expect(jobs.started.map((running) => [running.record.id, running.connection, running.reservedBefore])).toEqual([['req_sync', slot.connection, 1]]);
    expect(slot.connection.reserved).toBe(0);
  });

  test('a lease is held by this server for leaseMs', () => {
    const { scheduler } = world(() => 1_700_000_000_000);
    expect(scheduler.lease()).toEqual({ leaseOwner: 'srv_self', leaseExpiresAt: new Date(1_700_000_000_000 + OPTIONS.leaseMs) });
  });
});

describe('RequestScheduler claiming queued records', () => {
  test('claims only as many records as there are free slots, most free first, each slot reserved through its claim', async () => {
    const { scheduler, replica, records, jobs } = world();
    const one = replica({ replicaId: 'one', max: 2, busy: 1 });
    const three = replica({ replicaId: 'three', max: 4, busy: 1 });
    records.enqueue(...['req_1', 'req_2', 'req_3', 'req_4', 'req_5', 'req_6'].map((id) => record(id)));
    scheduler.queued('dep_a', false);
    await flush();
    expect(jobs.startedIds()).toEqual(['req_1', 'req_2', 'req_3', 'req_4']);
    expect(jobs.started.map((running) => running.connection.replicaId)).toEqual(['three', 'three', 'one', 'three']);
    expect(jobs.started.every((running) => running.reservedBefore === 1)).toBe(true);
    expect([one.freeSlots, three.freeSlots, one.reserved, three.reserved]).toEqual([0, 0, 0, 0]);
    // Each claim names the replica it reserved for, this server as lease owner, and the job timeouts.
    expect(records.claims[0].options).toMatchObject({ replicaId: 'three', leaseOwner: 'srv_self', leaseMs: OPTIONS.leaseMs });
    expect(records.claims[0].options.timeoutMs({ modality: 'video' })).toBe(1_800_000);
    expect(records.claims[0].reservedDuringClaim).toEqual([0, 1]);
    expect(records.queues.get('dep_a')!.map((queued) => queued.id)).toEqual(['req_5', 'req_6']);
  });

  test('a finished job\'s slot takes the next queued record', async () => {
    const { scheduler, replica, records, jobs } = world();
    replica({ max: 1 });
    scheduler.start();
    records.enqueue(record('req_1'), record('req_2'));
    scheduler.queued('dep_a');
    await flush();
    expect(jobs.startedIds()).toEqual(['req_1']);
    jobs.complete('req_1');
    await flush();
    expect(jobs.startedIds()).toEqual(['req_1', 'req_2']);
  });

  test('a replica joining takes queued work', async () => {
    const { scheduler, replica, records, jobs } = world();
    scheduler.start();
    records.enqueue(record('req_1'));
    scheduler.queued('dep_a');
    await flush();
    expect(records.claims).toEqual([]);
    replica({ max: 1 });
    await flush();
    expect(jobs.startedIds()).toEqual(['req_1']);
  });

  test('no free slot: the queue is not even read', async () => {
    const { scheduler, replica, records } = world();
    replica({ max: 1, busy: 1 });
    replica({ max: 4, draining: true });
    replica({ deploymentId: 'dep_other', max: 4 });
    records.enqueue(record('req_1'));
    scheduler.queued('dep_a');
    await flush();
    expect(records.claims).toEqual([]);
  });

  test('an empty queue gives the slot back and forgets the deployment: later wake-ups cost nothing', async () => {
    const { scheduler, replica, records } = world();
    const connection = replica({ max: 2 });
    scheduler.queued('dep_a');
    await flush();
    expect(records.claims).toHaveLength(1);
    expect(connection.reserved).toBe(0);
    scheduler.wake('dep_a');
    await flush();
    expect(records.claims).toHaveLength(1);
  });

  test('a failed claim gives the slot back and is logged; the next wake-up claims again', async () => {
    const { scheduler, replica, records, jobs, log } = world();
    const connection = replica({ max: 1 });
    records.enqueue(record('req_1'));
    records.nextClaim = async () => {
      throw new Error('serialization failure');
    };
    scheduler.queued('dep_a');
    await flush();
    expect(connection.reserved).toBe(0);
    expect(log.errors).toEqual(['claiming queued requests failed']);
    scheduler.wake('dep_a');
    await flush();
    expect(jobs.startedIds()).toEqual(['req_1']);
  });

  test('while a claim is in flight its slot is taken: a sync call is refused, not double-booked', async () => {
    const { scheduler, replica, records, jobs } = world();
    const connection = replica({ max: 1 });
    const claim = deferred<RequestRecord | null>();
    records.nextClaim = () => claim.promise;
    scheduler.queued('dep_a');
    await flush();
    expect(connection.reserved).toBe(1);
    expect(thrownCode(() => scheduler.reserveSlot('dep_a'))).toBe('replica_saturated');
    claim.resolve(record('req_1'));
    await flush();
    expect(jobs.startedIds()).toEqual(['req_1']);
    expect(connection.reserved).toBe(0);
    expect(connection.inFlight).toBe(1);
  });

  test('a record queued while a claim finds the queue empty is not forgotten', async () => {
    const { scheduler, replica, records, jobs } = world();
    replica({ max: 2 });
    const claim = deferred<RequestRecord | null>();
    records.nextClaim = () => claim.promise;
    scheduler.queued('dep_a');
    await flush();
    // Committed after the in-flight claim looked: that claim will answer "empty".
    records.enqueue(record('req_late'));
    scheduler.queued('dep_a');
    claim.resolve(null);
    await flush();
    expect(jobs.startedIds()).toEqual(['req_late']);
  });

  test('wake-ups: a submission here announces it; one from a peer or a requeue claims without announcing', async () => {
    const { scheduler, replica, records, jobs, notifier, events: bus } = world();
    replica({ max: 4 });
    scheduler.start();
    await flush();
    records.enqueue(record('req_here'));
    scheduler.queued('dep_a');
    await flush();
    records.enqueue(record('req_peer'));
    notifier.deliver('request-queued', 'dep_a');
    await flush();
    const requeued = record('req_requeued');
    records.enqueue(requeued);
    bus.emit('requestUpdated', requeued);
    await flush();
    records.enqueue(record('req_running'));
    bus.emit('requestUpdated', record('req_other', 'dep_a', { status: 'running' }));
    await flush();
    expect(jobs.startedIds()).toEqual(['req_here', 'req_peer', 'req_requeued']);
    expect(notifier.published).toEqual([{ topic: 'request-queued', payload: 'dep_a' }]);
  });

  test('after stop nothing more is claimed: queued work stays queued for another server', async () => {
    const { scheduler, replica, records } = world();
    replica({ max: 4 });
    scheduler.start();
    await flush();
    await scheduler.stop();
    records.enqueue(record('req_1'));
    scheduler.queued('dep_a');
    await flush();
    expect(records.claims).toEqual([]);
  });
});

describe('RequestScheduler sweep', () => {
  test('renews this server\'s leases and ends overdue records with the right code', async () => {
    const { scheduler, records, jobs, replica } = world();
    replica({ max: 1 });
    records.enqueue(record('req_running'));
    scheduler.queued('dep_a');
    await flush();
    records.overdueResult = { deadlinePassed: ['req_late'], leaseLost: ['req_orphan'], expiredInQueue: ['req_stale'] };
    scheduler.start();
    await flush();
    expect(records.renewed).toEqual([{ owner: 'srv_self', ids: ['req_running'], leaseMs: OPTIONS.leaseMs }]);
    expect(jobs.expired).toEqual([
      { id: 'req_late', code: 'model_timeout' },
      { id: 'req_orphan', code: 'pod_crash' },
      { id: 'req_stale', code: 'model_timeout' },
    ]);
  });

  test('wakes deployments with queued work it was never told about (a missed notification)', async () => {
    const { scheduler, records, jobs, replica } = world();
    replica({ max: 1 });
    replica({ deploymentId: 'dep_b', max: 1 });
    records.enqueue(record('req_a'), record('req_b', 'dep_b'));
    scheduler.start();
    await flush();
    expect(jobs.startedIds().sort()).toEqual(['req_a', 'req_b']);
  });

  test('a lost notification connection sweeps at once; a failed sweep is logged and the next one runs', async () => {
    const { scheduler, records, jobs, replica, notifier, log } = world();
    replica({ max: 1 });
    records.failSweep = true;
    scheduler.start();
    await flush();
    expect(log.errors).toEqual(['request sweep failed']);
    records.failSweep = false;
    records.enqueue(record('req_1'));
    notifier.reset();
    await flush();
    expect(jobs.startedIds()).toEqual(['req_1']);
  });
});
