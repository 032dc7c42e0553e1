import { ColdStartQueue, type ClientPresence, type ColdStartDeployment, type ColdStartRefusal } from '../../../control-plane/dispatch/cold-start-queue';
import { AppError } from '../../../control-plane/errors/app-error';

const ZERO: ColdStartDeployment = { id: 'dep_zero', scaleToZeroAfterSeconds: 60, coldStartQueueLimit: 3 };
const ALWAYS_ON: ColdStartDeployment = { id: 'dep_on', scaleToZeroAfterSeconds: null, coldStartQueueLimit: 3 };

/** A queue over a fake cluster: `ready` says which deployments have a replica; a manual clock. */
function fixture(options: { maxWaitMs?: number; startupEstimateMs?: number } = {}) {
  const ready = new Set<string>();
  const announced: string[] = [];
  const refusals: Array<[string, ColdStartRefusal]> = [];
  const clock = { now: 1_000_000 };
  const queue = new ColdStartQueue({
    hasReplica: (id) => ready.has(id),
    coldStart: (id) => announced.push(id),
    refused: (id, reason) => refusals.push([id, reason]),
    now: () => clock.now,
  }, { maxWaitMs: options.maxWaitMs ?? 300_000, startupEstimateMs: options.startupEstimateMs ?? 60_000 });
  return { queue, ready, announced, refusals, clock };
}

/** A client that can leave, and counts who still listens. */
function client() {
  const listeners = new Set<() => void>();
  const presence: ClientPresence = {
    onLeft: (left) => {
      listeners.add(left);
      return () => listeners.delete(left);
    },
  };
  return { presence, listening: () => listeners.size, leave: () => [...listeners].forEach((left) => left()) };
}

async function refusalOf(waiting: Promise<unknown> | null): Promise<AppError> {
  try {
    await waiting;
  } catch (error) {
    return error as AppError;
  }
  throw new Error('expected a refusal');
}

// Waits end by timers: fake ones, so no test leaves a real timer behind or waits on a real clock.
beforeEach(() => {
  jest.useFakeTimers({ doNotFake: ['setImmediate'] });
});

afterEach(() => {
  jest.useRealTimers();
});

describe('ColdStartQueue', () => {
  it('lets a request go on at once when a replica takes work anywhere', () => {
    const { queue, ready, announced } = fixture();
    ready.add(ZERO.id);
    expect(queue.wait(ZERO, null)).toBeNull();
    expect(announced).toEqual([]);
  });

  it('holds requests at a deployment scaled to zero and releases them in arrival order when a replica joins, with how long each waited', async () => {
    const { queue, ready, announced, clock } = fixture();
    const order: string[] = [];
    const first = queue.wait(ZERO, null)!.then((waited) => order.push(`first ${waited}`));
    clock.now += 400;
    const second = queue.wait(ZERO, null)!.then((waited) => order.push(`second ${waited}`));
    expect(queue.waiting(ZERO.id)).toBe(2);
    // The capacity loop is told once (not per request) that requests wait.
    expect(announced).toEqual([ZERO.id]);
    queue.capacity(ZERO.id); // a slot freed elsewhere: still no replica of this deployment
    expect(queue.waiting(ZERO.id)).toBe(2);
    clock.now += 600;
    ready.add(ZERO.id);
    queue.capacity(ZERO.id);
    await Promise.all([first, second]);
    expect(order).toEqual(['first 1000', 'second 600']);
    expect(queue.waiting(ZERO.id)).toBe(0);
    expect(queue.waitingRows()).toEqual([]);
  });

  it('releases them when a peer server reports a replica', async () => {
    const { queue, ready } = fixture();
    const waiting = queue.wait(ZERO, null)!;
    queue.peersChanged();
    expect(queue.waiting(ZERO.id)).toBe(1);
    ready.add(ZERO.id);
    queue.peersChanged();
    await expect(waiting).resolves.toBe(0);
  });

  it('refuses past coldStartQueueLimit with 503 no_pod_available and a Retry-After of the start-up still to go', async () => {
    const { queue, refusals, clock } = fixture({ startupEstimateMs: 60_000 });
    for (let index = 0; index < 3; index++) void queue.wait(ZERO, null);
    clock.now += 20_000;
    const refusal = await refusalOf(queue.wait(ZERO, null));
    expect(refusal).toBeInstanceOf(AppError);
    expect(refusal).toMatchObject({ code: 'no_pod_available', retryAfterSeconds: 40 });
    expect(refusal.message).toContain('coldStartQueueLimit is 3');
    expect(refusals).toEqual([[ZERO.id, 'queue_full']]);
    expect(queue.waiting(ZERO.id)).toBe(3);
  });

  it('estimates Retry-After from the last start-up measured here once there is one, never below 2 s', async () => {
    const { queue, ready, clock } = fixture({ startupEstimateMs: 60_000 });
    const limited = { ...ZERO, coldStartQueueLimit: 1 };
    const measured = queue.wait(limited, null)!;
    clock.now += 8_000;
    ready.add(ZERO.id);
    queue.capacity(ZERO.id);
    await measured;
    ready.delete(ZERO.id); // scaled to zero again
    void queue.wait(limited, null);
    clock.now += 3_000;
    expect(await refusalOf(queue.wait(limited, null))).toMatchObject({ retryAfterSeconds: 5 });
    clock.now += 30_000; // late: the estimate is spent
    expect(await refusalOf(queue.wait(limited, null))).toMatchObject({ retryAfterSeconds: 2 });
  });

  it('with a limit of 0 refuses every request but still starts a replica', async () => {
    const { queue, announced } = fixture();
    expect(await refusalOf(queue.wait({ ...ZERO, coldStartQueueLimit: 0 }, null))).toMatchObject({ code: 'no_pod_available' });
    expect(announced).toEqual([ZERO.id]);
  });

  it('gives up after the longest wait with 503 no_pod_available, and the request leaves the queue', async () => {
    const { queue, refusals } = fixture({ maxWaitMs: 5_000 });
    const waiting = queue.wait(ZERO, null)!;
    const refused = refusalOf(waiting);
    jest.advanceTimersByTime(4_999);
    expect(queue.waiting(ZERO.id)).toBe(1);
    jest.advanceTimersByTime(1);
    const refusal = await refused;
    expect(refusal).toMatchObject({ code: 'no_pod_available', message: expect.stringContaining('within 5 s'), retryAfterSeconds: 60 });
    expect(refusals).toEqual([[ZERO.id, 'max_wait']]);
    expect(queue.waiting(ZERO.id)).toBe(0);
  });

  it('takes a shorter wait when asked (a sync image call within its budget)', async () => {
    const { queue } = fixture({ maxWaitMs: 300_000 });
    const refused = refusalOf(queue.wait(ZERO, null, 30_000));
    jest.advanceTimersByTime(30_000);
    expect(await refused).toMatchObject({ code: 'no_pod_available', message: expect.stringContaining('within 30 s') });
  });

  it('lets a client that leaves go at once: its place is free, its listener and timer gone', async () => {
    const { queue, ready } = fixture();
    const limited = { ...ZERO, coldStartQueueLimit: 1 };
    const leaving = client();
    const left = queue.wait(limited, leaving.presence)!;
    expect(leaving.listening()).toBe(1);
    leaving.leave();
    await expect(left).resolves.toBeNull();
    expect(leaving.listening()).toBe(0);
    expect(queue.waiting(ZERO.id)).toBe(0);
    expect(jest.getTimerCount()).toBe(0);
    // Its place is taken by the next request, which is released normally (and stops listening).
    const staying = client();
    const served = queue.wait(limited, staying.presence)!;
    ready.add(ZERO.id);
    queue.capacity(ZERO.id);
    await expect(served).resolves.toBe(0);
    expect(staying.listening()).toBe(0);
    expect(jest.getTimerCount()).toBe(0);
  });

  it('a client already gone never waits', async () => {
    const { queue } = fixture();
    const gone: ClientPresence = { onLeft: (left) => {
      left();
      return () => {};
    } };
    await expect(queue.wait(ZERO, gone)).resolves.toBeNull();
    expect(queue.waiting(ZERO.id)).toBe(0);
  });

  it('at a deployment that does not scale to zero, never waits: the contract answers 503 while a replica starts', () => {
    const { queue } = fixture();
    expect(queue.wait(ALWAYS_ON, null)).toBeNull();
    expect(queue.waiting(ALWAYS_ON.id)).toBe(0);
  });

  it('noReplica starts a replica of a deployment that scales to zero (a background response, retried by its runner), and of no other', () => {
    const { queue, announced, clock } = fixture();
    queue.noReplica(ALWAYS_ON);
    queue.noReplica(ZERO);
    queue.noReplica(ZERO);
    expect(announced).toEqual([ZERO.id]);
    clock.now += 1_000;
    queue.noReplica(ZERO);
    expect(announced).toEqual([ZERO.id, ZERO.id]);
  });
});
