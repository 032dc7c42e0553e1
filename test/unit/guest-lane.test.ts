import { GuestLane } from '../../gateway/v1/guest-lane';

const turn = () => new Promise((resolve) => setImmediate(resolve));

/** The shared endpoint's guest lane: guest attempts start a few per event-loop turn, after the turn's I/O, in arrival order. */
describe('GuestLane', () => {
  test('never starts work synchronously; starts at most perTurn per turn, in arrival order', async () => {
    const lane = new GuestLane(3);
    const started: number[] = [];
    for (let index = 0; index < 8; index++) lane.run(() => started.push(index));
    expect(started).toEqual([]);
    expect(lane.waiting).toBe(8);
    await turn();
    expect(started).toEqual([0, 1, 2]);
    await turn();
    expect(started).toEqual([0, 1, 2, 3, 4, 5]);
    await turn();
    expect(started).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
    expect(lane.waiting).toBe(0);
    lane.run(() => started.push(8)); // idle again: the next turn starts it
    await turn();
    expect(started.at(-1)).toBe(8);
  });

  test('I/O that arrives between turns is handled before the rest of a burst', async () => {
    const lane = new GuestLane(2);
    const order: string[] = [];
    for (let index = 0; index < 6; index++) lane.run(() => order.push(`guest ${index}`));
    await turn();
    // An owner's callback queued now (as a poll-phase callback would be) runs before the remaining guests.
    setImmediate(() => order.push('owner'));
    await turn();
    await turn();
    await turn();
    expect(order.indexOf('owner')).toBeLessThan(order.indexOf('guest 5'));
    expect(order.filter((entry) => entry.startsWith('guest'))).toEqual(['guest 0', 'guest 1', 'guest 2', 'guest 3', 'guest 4', 'guest 5']);
  });

  test('a start that throws does not stop the lane', async () => {
    const lane = new GuestLane(4);
    const started: string[] = [];
    lane.run(() => { throw new Error('boom'); });
    lane.run(() => started.push('after'));
    await turn();
    expect(started).toEqual(['after']);
  });
});
