/**
 * How the control plane counts batch lines a live job can have: on a replica whose agent
 * preempts them (`Hello.preempts_batch_lines`) a line's slot is as good as free for a live job
 * until the agent has set that line aside; elsewhere a line holds its slot until it ends. The
 * dispatcher picks by that, and the queue-depth view does not count parked lines as waiting.
 */
import type { ControlFrame } from '../../proto/worker/v1';
import { AgentConnection, type ConnectionOwner } from '../../control-plane/dispatch/agent-connection';
import { linesKeptLiveWaiting, liveWaiting } from '../../control-plane/batches/batch-capacity';
import { Dispatcher } from '../../control-plane/dispatch/dispatcher';
import { Job, type DispatchRequest, type JobListener } from '../../control-plane/dispatch/job';

const listener: JobListener = { onChunk: () => {}, onOutput: () => {}, onCompleted: () => {}, onFailed: () => {} };
const owner: ConnectionOwner = { retry: () => {}, released: () => {} };
const request = (batch: boolean): DispatchRequest => ({
  deploymentId: 'dep', kind: 'JOB_KIND_CHAT_COMPLETION', body: Buffer.from('{}'), stream: false, includeUsage: false, model: 'm', deadlineUnixMs: 0, ...(batch ? { batch: true } : {}),
});

function replica(id: string, preempts: boolean, slots = 4): AgentConnection {
  const stream = { write: (_frame: ControlFrame) => true } as unknown as ConstructorParameters<typeof AgentConnection>[0];
  return new AgentConnection(stream, `agt-${id}`, id, 'dep', slots, owner, 'ws', false, 'cpu', true, preempts);
}

let sequence = 0;
function place(connection: AgentConnection, batch: boolean, count = 1): void {
  for (let index = 0; index < count; index++) connection.assign(new Job(`job-${sequence++}`, request(batch), listener, connection));
}

describe('batch lines as capacity for live jobs', () => {
  test('a preempting replica full of lines has every slot free for live jobs, one fewer per live job that took one', () => {
    const connection = replica('a', true);
    place(connection, true, 4);
    expect(connection.freeSlots).toBe(0);
    expect(connection.preemptibleLines).toBe(4);
    expect(connection.liveFreeSlots).toBe(4);
    // A line's slot weighs half a busy one: a free slot elsewhere is still preferred.
    expect(connection.liveLoad).toBe(0.5);
    expect(connection.waiting).toBe(0);
    // Two live jobs: each took a line's slot (the agent parked two lines).
    place(connection, false, 2);
    expect(connection.inFlight).toBe(6);
    expect(connection.preemptibleLines).toBe(2);
    expect(connection.liveFreeSlots).toBe(2);
    expect(connection.liveLoad).toBe(0.75);
    expect(connection.waiting).toBe(0);
    // Four more live jobs: two take the last lines' slots, two wait.
    place(connection, false, 4);
    expect(connection.preemptibleLines).toBe(0);
    expect(connection.liveFreeSlots).toBe(0);
    expect(connection.waiting).toBe(2);
  });

  test('a replica that cannot preempt counts its lines as busy slots', () => {
    const connection = replica('b', false);
    place(connection, true, 3);
    expect(connection.preemptibleLines).toBe(0);
    expect(connection.liveFreeSlots).toBe(1);
    expect(connection.liveLoad).toBe(0.75);
    place(connection, false, 2);
    expect(connection.waiting).toBe(1);
  });

  test('a draining replica has nothing for live jobs', () => {
    const connection = replica('c', true);
    place(connection, true, 2);
    connection.drain('test');
    expect(connection.liveFreeSlots).toBe(0);
  });

  test('the dispatcher sends a live job where lines hold the slots rather than where live jobs do, and to a free slot before a line\'s', () => {
    const dispatcher = new Dispatcher();
    const withLines = replica('lines', true);
    const withLive = replica('live', true);
    dispatcher.register(withLines);
    dispatcher.register(withLive);
    place(withLines, true, 4);
    place(withLive, false, 3);
    for (let index = 0; index < 4; index++) expect(dispatcher.leastLoaded('dep')).toBe(withLines);
    const idle = replica('idle', true);
    dispatcher.register(idle);
    place(idle, true, 1);
    for (let index = 0; index < 4; index++) expect(dispatcher.leastLoaded('dep')).toBe(idle);
  });

  test('the batch window shrinks only for lines that keep live jobs waiting: not on a replica that sets them aside', () => {
    const preempting = replica('p', true, 2);
    place(preempting, true, 2);
    place(preempting, false, 3);
    // Three live jobs on two slots: one waits, behind the other live jobs, not behind a line.
    expect(liveWaiting(preempting)).toBe(true);
    expect(linesKeptLiveWaiting(preempting)).toBe(false);
    const blocking = replica('b', false, 2);
    place(blocking, true, 1);
    place(blocking, false, 2);
    expect(liveWaiting(blocking)).toBe(true);
    expect(linesKeptLiveWaiting(blocking)).toBe(true);
    // Full, with a live job on it and nothing waiting yet: the next live request would wait for the line.
    const full = replica('f', false, 2);
    place(full, true, 1);
    place(full, false, 1);
    expect(liveWaiting(full)).toBe(false);
    expect(linesKeptLiveWaiting(full)).toBe(true);
  });
});
