/**
 * Dispatcher: which replica a job goes to (least loaded relative to its concurrency; draining,
 * closed and unregistered — not yet ready — replicas never), what a refusal by a draining agent
 * does (run elsewhere while nothing was produced, at most three attempts, never a guest's), and
 * who hears that a slot was freed. Agents are real AgentConnections over recording streams.
 */
import { Dispatcher } from '../../../control-plane/dispatch/dispatcher';
import { mostFree } from '../../../control-plane/placement/slots';
import type { AgentConnection } from '../../../control-plane/dispatch/agent-connection';
import { agent, events, flush, RecordingListener, request, reserveSlots, thrownCode } from './fakes';

interface ReplicaSpec {
  max: number;
  busy: number;
  draining?: boolean;
  closed?: boolean;
  /** Connected but not registered: its engine has not reported ready yet. */
  unregistered?: boolean;
}

/** Registers the replicas (in order) with `busy` jobs each already running. */
function pool(dispatcher: Dispatcher, specs: ReplicaSpec[]): AgentConnection[] {
  return specs.map((spec, index) => {
    const { connection } = agent(dispatcher, { replicaId: `r${index}`, maxConcurrency: spec.max });
    if (!spec.unregistered) dispatcher.register(connection);
    for (let job = 0; job < spec.busy; job++) dispatcher.dispatchTo(connection, request(), new RecordingListener());
    if (spec.draining) connection.draining = true;
    if (spec.closed) connection.closed = true;
    return connection;
  });
}

describe('Dispatcher placement', () => {
  test.each<[string, ReplicaSpec[], string]>([
    ['the only ready replica', [{ max: 4, busy: 3 }], 'r0'],
    ['the lower load relative to concurrency, not the fewer jobs', [{ max: 2, busy: 1 }, { max: 8, busy: 3 }], 'r1'],
    ['an idle replica over a busy one', [{ max: 4, busy: 2 }, { max: 4, busy: 0 }, { max: 4, busy: 1 }], 'r1'],
    ['a replica past its concurrency (the job queues on its agent)', [{ max: 2, busy: 5 }], 'r0'],
    ['a busier ready replica over an idle draining one', [{ max: 4, busy: 0, draining: true }, { max: 4, busy: 3 }], 'r1'],
    ['a busier ready replica over an idle closed one', [{ max: 4, busy: 0, closed: true }, { max: 4, busy: 3 }], 'r1'],
    ['a busier ready replica over an idle one whose engine is not ready yet', [{ max: 4, busy: 0, unregistered: true }, { max: 4, busy: 3 }], 'r1'],
  ])('picks %s', (_name, specs, expected) => {
    const dispatcher = new Dispatcher();
    pool(dispatcher, specs);
    const job = dispatcher.dispatch(request(), new RecordingListener());
    expect(job.replicaId).toBe(expected);
  });

  test.each<[string, ReplicaSpec[]]>([
    ['no replica was ever registered', []],
    ['every replica is draining', [{ max: 4, busy: 0, draining: true }, { max: 4, busy: 0, draining: true }]],
    ['every replica is closed or draining', [{ max: 4, busy: 0, closed: true }, { max: 4, busy: 0, draining: true }]],
    ['the only replica is not ready', [{ max: 4, busy: 0, unregistered: true }]],
  ])('throws no_replica_available (503, retry in 5 s) when %s', (_name, specs) => {
    const dispatcher = new Dispatcher();
    pool(dispatcher, specs);
    expect(thrownCode(() => dispatcher.dispatch(request(), new RecordingListener()))).toBe('no_replica_available');
  });

  test('a job dispatched to a deployment never lands on another deployment\'s replica', () => {
    const dispatcher = new Dispatcher();
    const other = agent(dispatcher, { deploymentId: 'dep_other' }).connection;
    dispatcher.register(other);
    expect(thrownCode(() => dispatcher.dispatch(request({ deploymentId: 'dep_a' }), new RecordingListener()))).toBe('no_replica_available');
    expect(other.inFlight).toBe(0);
  });

  test('equally loaded replicas share work: ties rotate', () => {
    const dispatcher = new Dispatcher();
    pool(dispatcher, [{ max: 4, busy: 1 }, { max: 4, busy: 1 }, { max: 4, busy: 1 }]);
    const picked = Array.from({ length: 6 }, () => dispatcher.leastLoaded('dep_a')!.replicaId);
    expect(new Set(picked)).toEqual(new Set(['r0', 'r1', 'r2']));
  });

  test('a burst spreads over replicas by load: 6 jobs on 3 idle replicas of 2 slots land 2 each', () => {
    const dispatcher = new Dispatcher();
    const connections = pool(dispatcher, [{ max: 2, busy: 0 }, { max: 2, busy: 0 }, { max: 2, busy: 0 }]);
    for (let index = 0; index < 6; index++) dispatcher.dispatch(request(), new RecordingListener());
    expect(connections.map((connection) => connection.inFlight)).toEqual([2, 2, 2]);
  });

  test('an unregistered replica is no longer chosen; its pool is forgotten once empty', () => {
    const dispatcher = new Dispatcher();
    const [first, second] = pool(dispatcher, [{ max: 4, busy: 0 }, { max: 4, busy: 2 }]);
    dispatcher.unregister(first);
    expect(dispatcher.dispatch(request(), new RecordingListener()).replicaId).toBe('r1');
    dispatcher.unregister(second);
    expect(dispatcher.connections('dep_a')).toEqual([]);
    expect(dispatcher.connections()).toEqual([]);
  });

  test('the Assign carries the request to the chosen agent', async () => {
    const dispatcher = new Dispatcher();
    const { connection, frames } = agent(dispatcher);
    dispatcher.register(connection);
    const job = dispatcher.dispatch(request({ model: 'model-a', body: Buffer.from('{"x":1}') }), new RecordingListener());
    await flush(1);
    expect(frames).toEqual([{ frame: 'assign', assign: expect.objectContaining({ jobId: job.id, model: 'model-a', body: Buffer.from('{"x":1}') }) }]);
  });

  test('job ids are unique', () => {
    const dispatcher = new Dispatcher();
    pool(dispatcher, [{ max: 100, busy: 0 }]);
    const ids = Array.from({ length: 50 }, () => dispatcher.dispatch(request(), new RecordingListener()).id);
    expect(new Set(ids).size).toBe(50);
  });
});

describe('Dispatcher free slots (what a scheduler may claim for)', () => {
  test.each<[string, ReplicaSpec[], number[], string | null]>([
    ['the replica with the most free slots', [{ max: 4, busy: 3 }, { max: 8, busy: 2 }, { max: 4, busy: 0 }], [0, 0, 0], 'r1'],
    ['reserved slots count as taken', [{ max: 4, busy: 0 }, { max: 4, busy: 1 }], [3, 0], 'r1'],
    ['none when every slot is running or reserved', [{ max: 2, busy: 1 }, { max: 2, busy: 0 }], [1, 2], null],
    ['none on a draining replica', [{ max: 4, busy: 0, draining: true }], [0], null],
    ['none on a closed replica', [{ max: 4, busy: 0, closed: true }], [0], null],
  ])('mostFree: %s', (_name, specs, reserved, expected) => {
    const dispatcher = new Dispatcher();
    const connections = pool(dispatcher, specs);
    connections.forEach((connection, index) => reserveSlots(connection, reserved[index]));
    expect(mostFree(dispatcher.connections('dep_a'))?.replicaId ?? null).toBe(expected);
  });
});

describe('Dispatcher retry of a job a draining agent refused', () => {
  function twoReplicas() {
    const dispatcher = new Dispatcher();
    const [first, second] = pool(dispatcher, [{ max: 4, busy: 0 }, { max: 4, busy: 1 }]);
    const listener = new RecordingListener();
    const job = dispatcher.dispatch(request(), listener);
    expect(job.carrier).toBe(first);
    return { dispatcher, first, second, listener, job };
  }

  test('runs it on another replica when nothing was produced: the client never hears the refusal', () => {
    const { first, second, listener, job } = twoReplicas();
    first.draining = true;
    first.onJobEvent(events.failed(job.id, 'agent_draining'));
    expect(job.carrier).toBe(second);
    expect(job.attempts).toBe(2);
    expect(first.inFlight).toBe(0);
    expect(second.jobs.has(job.id)).toBe(true);
    expect(listener.calls).toEqual([]);
    second.onJobEvent(events.chunk(job.id, 'hello'));
    second.onJobEvent(events.completed(job.id));
    expect(listener.calls).toEqual(['chunk', 'completed']);
  });

  test.each<[string, (job: { cancel(reason: string): void }, first: AgentConnection, jobId: string) => void]>([
    ['after a chunk reached the client', (_job, first, jobId) => first.onJobEvent(events.chunk(jobId))],
    ['after it was canceled', (job) => job.cancel('client left')],
  ])('never retries %s: the failure reaches the listener once', (_name, before) => {
    const { first, second, listener, job } = twoReplicas();
    before(job, first, job.id);
    first.onJobEvent(events.failed(job.id, 'agent_draining'));
    expect(second.jobs.has(job.id)).toBe(false);
    expect(job.attempts).toBe(1);
    expect(job.finished).toBe(true);
    expect(listener.terminals).toEqual(['failed:agent_draining']);
    expect(first.inFlight).toBe(0);
  });

  test('other failures are never retried', () => {
    const { first, second, listener, job } = twoReplicas();
    first.onJobEvent(events.failed(job.id, 'engine_error'));
    expect(second.jobs.has(job.id)).toBe(false);
    expect(listener.terminals).toEqual(['failed:engine_error']);
  });

  test('fails with agent_draining when no other replica is taking work', () => {
    const dispatcher = new Dispatcher();
    const [only, drained] = pool(dispatcher, [{ max: 4, busy: 0 }, { max: 4, busy: 0, draining: true }]);
    const listener = new RecordingListener();
    const job = dispatcher.dispatch(request(), listener);
    only.onJobEvent(events.failed(job.id, 'agent_draining'));
    expect(drained.inFlight).toBe(0);
    expect(job.finished).toBe(true);
    expect(listener.terminals).toEqual(['failed:agent_draining']);
  });

  test('gives up after three attempts', () => {
    const { first, second, listener, job } = twoReplicas();
    first.onJobEvent(events.failed(job.id, 'agent_draining'));
    second.onJobEvent(events.failed(job.id, 'agent_draining'));
    expect(job.attempts).toBe(3);
    expect(job.carrier).toBe(first);
    expect(listener.calls).toEqual([]);
    first.onJobEvent(events.failed(job.id, 'agent_draining'));
    expect(listener.terminals).toEqual(['failed:agent_draining']);
    expect(first.inFlight + second.inFlight).toBe(1); // only the job `second` was already running
  });

  test('a shared-serving guest\'s job is never moved to a slot it was not admitted to', () => {
    const dispatcher = new Dispatcher();
    const [first, second] = pool(dispatcher, [{ max: 4, busy: 0 }, { max: 4, busy: 0 }]);
    const listener = new RecordingListener();
    const job = dispatcher.dispatchTo(first, request({ guest: true }), listener);
    first.onJobEvent(events.failed(job.id, 'agent_draining'));
    expect(second.inFlight).toBe(0);
    expect(first.guestInFlight).toBe(0);
    expect(listener.terminals).toEqual(['failed:agent_draining']);
  });

  test('a closed agent fails its jobs with pod_crash (not retried: the engine may have run them)', () => {
    const { first, second, listener } = twoReplicas();
    first.close('stream reset');
    expect(listener.terminals).toEqual(['failed:pod_crash']);
    expect(second.inFlight).toBe(1);
  });
});

describe('Dispatcher capacity notifications', () => {
  test('a replica joining and a job leaving tell listeners its deployment may have a free slot', () => {
    const dispatcher = new Dispatcher();
    const heard: string[] = [];
    dispatcher.onCapacity((deploymentId) => heard.push(deploymentId));
    const { connection } = agent(dispatcher, { deploymentId: 'dep_b' });
    dispatcher.register(connection);
    expect(heard).toEqual(['dep_b']);
    const completed = dispatcher.dispatch(request({ deploymentId: 'dep_b' }), new RecordingListener());
    const failed = dispatcher.dispatch(request({ deploymentId: 'dep_b' }), new RecordingListener());
    expect(heard).toEqual(['dep_b']);
    connection.onJobEvent(events.completed(completed.id));
    connection.onJobEvent(events.failed(failed.id, 'engine_error'));
    expect(heard).toEqual(['dep_b', 'dep_b', 'dep_b']);
  });

  test('drainAll drains every replica of every deployment: none takes new work', () => {
    const dispatcher = new Dispatcher();
    const a = agent(dispatcher, { deploymentId: 'dep_a' });
    const b = agent(dispatcher, { deploymentId: 'dep_b' });
    dispatcher.register(a.connection);
    dispatcher.register(b.connection);
    dispatcher.drainAll('shutdown');
    expect(a.frames).toEqual([{ frame: 'drain', drain: { reason: 'shutdown' } }]);
    expect(b.frames).toEqual([{ frame: 'drain', drain: { reason: 'shutdown' } }]);
    expect(thrownCode(() => dispatcher.dispatch(request({ deploymentId: 'dep_b' }), new RecordingListener()))).toBe('no_replica_available');
  });
});
