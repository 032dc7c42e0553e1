/**
 * Batch lines as the dispatch layer counts them: their own in-flight count on a replica, no
 * owner demand for the autoscaler, no retry on another replica by the dispatcher, and slots a
 * shared-serving guest may still take (batches rank below guests).
 */
import { ServerRegistry } from '../../../control-plane/cluster/server-registry';
import { RecordingListener, recordingLogger, request } from './fakes';
import { sharingWorld } from './sharing-fixtures';

describe('batch lines in dispatch', () => {
  test('count as batch work on their replica until they end, and leave guests their slots', () => {
    const world = sharingWorld();
    const connection = world.replica({ max: 8 });
    const lines = Array.from({ length: 6 }, () => world.dispatcher.dispatchTo(connection, request({ batch: true }), new RecordingListener()));
    expect([connection.inFlight, connection.batchInFlight, connection.freeSlots]).toEqual([6, 6, 2]);
    // 8 slots, 2 kept for the owner: the 6 the lines hold are a guest's to take (it waits for one line at most).
    expect(world.pool.guestSlots(connection)).toBe(6);
    connection.onJobEvent({ jobId: lines[0].id, event: 'completed', completed: { finishReason: 'stop' } });
    expect([connection.inFlight, connection.batchInFlight]).toEqual([5, 5]);
    connection.close('gone');
    expect(connection.batchInFlight).toBe(0);
  });

  test('are no owner demand in the load a server reports for autoscaling', () => {
    const world = sharingWorld();
    const connection = world.replica({ max: 8, owners: 1 });
    for (let index = 0; index < 3; index++) world.dispatcher.dispatchTo(connection, request({ batch: true }), new RecordingListener());
    const registry = new ServerRegistry({} as never, 'srv', '127.0.0.1:1', world.dispatcher, { heartbeatIntervalMs: 1_000, serverTimeoutMs: 5_000 }, recordingLogger().logger);
    expect(registry.loadSnapshot().dep_a).toMatchObject({ inFlight: 1, freeSlots: 4 });
  });

  test('a line refused by a draining agent is not sent to another replica by the dispatcher (its runner re-queues it)', () => {
    const world = sharingWorld();
    const first = world.replica({ max: 4 });
    world.replica({ max: 4 });
    const listener = new RecordingListener();
    const job = world.dispatcher.dispatchTo(first, request({ batch: true }), listener);
    first.onJobEvent({ jobId: job.id, event: 'failed', failed: { code: 'agent_draining', message: 'draining', engineStatus: 0 } });
    expect(listener.failures.map((failure) => failure.code)).toEqual(['agent_draining']);
  });
});
