import { AdapterSlots, type AdapterLoader } from '../../worker-agent/engines/adapter-slots';
import { adapterLoadFailed } from '../../worker-agent/engines/adapter-failure';
import { EngineFailure } from '../../worker-agent/engines/engine-failure';
import type { AdapterRef } from '../../proto/worker/v1/index';

function ref(name: string, overrides: Partial<AdapterRef> = {}): AdapterRef {
  return { name, displayName: `client-${name}`, format: 'ADAPTER_FORMAT_GGUF', source: 'http://storage.invalid/x', sha256: '', sizeBytes: 0, rank: 8, scale: 0, ...overrides };
}

/** A loader whose loads the test finishes by hand, recording loads and unloads. */
function manualLoader() {
  const pending = new Map<string, { resolve: (handle: string) => void; reject: (error: unknown) => void }>();
  const loads: string[] = [];
  const unloads: string[] = [];
  const loader: AdapterLoader<string> = {
    load: (adapter) => new Promise<string>((resolve, reject) => {
      loads.push(adapter.name);
      pending.set(adapter.name, { resolve, reject });
    }),
    unload: async (name) => { unloads.push(name); },
  };
  const finish = (name: string) => pending.get(name)!.resolve(`handle-${name}`);
  const fail = (name: string, error: unknown) => pending.get(name)!.reject(error);
  return { loader, loads, unloads, finish, fail };
}

/** A loader that loads at once. */
function instantLoader() {
  const unloads: string[] = [];
  let loads = 0;
  const loader: AdapterLoader<string> = { load: async (adapter) => { loads += 1; return adapter.name; }, unload: async (name) => { unloads.push(name); } };
  return { loader, unloads, loads: () => loads };
}

const capacity = (maxLoras: number, maxCpuLoras = 0, maxLoraRank = 64) => ({ maxLoras, maxCpuLoras, maxLoraRank });
const flush = () => new Promise((resolve) => setImmediate(resolve));

describe('AdapterSlots', () => {
  it('loads an adapter once for jobs asking at the same time, showing it LOADING, then GPU with its load time', async () => {
    let now = 1_000;
    const manual = manualLoader();
    const slots = new AdapterSlots(capacity(2), manual.loader, () => now);
    const changes: number[] = [];
    slots.onChange(() => changes.push(now));
    const leases = [slots.acquire(ref('a')), slots.acquire(ref('a')), slots.acquire(ref('a'))];
    await flush();
    expect(manual.loads).toEqual(['a']);
    expect(slots.snapshot()).toEqual([{ name: 'a', state: 'ADAPTER_STATE_LOADING', loadMs: 0, error: '', lastUsedUnixMs: 1_000 }]);
    now = 1_250;
    manual.finish('a');
    const held = await Promise.all(leases);
    expect(held.map((lease) => lease.handle)).toEqual(['handle-a', 'handle-a', 'handle-a']);
    expect(slots.snapshot()).toEqual([{ name: 'a', state: 'ADAPTER_STATE_GPU', loadMs: 250, error: '', lastUsedUnixMs: 1_000 }]);
    expect(changes.length).toBeGreaterThanOrEqual(2);
    for (const lease of held) lease.release();
    // A held adapter is not loaded again.
    await slots.acquire(ref('a'));
    expect(manual.loads).toEqual(['a']);
  });

  it('unloads the least recently used adapter beyond capacity, never one a running job holds', async () => {
    let now = 0;
    const instant = instantLoader();
    const slots = new AdapterSlots(capacity(2), instant.loader, () => now);
    now = 1; const a = await slots.acquire(ref('a'));
    now = 2; (await slots.acquire(ref('b'))).release();
    // `a` is still in use and older than `b`: `b` goes when `c` arrives.
    now = 3; const c = await slots.acquire(ref('c'));
    await flush();
    expect(instant.unloads).toEqual(['b']);
    expect(slots.snapshot().map((entry) => entry.name).sort()).toEqual(['a', 'c']);
    // Both held and a fourth arrives: the engine briefly holds three, and the first release evicts.
    now = 4; const d = await slots.acquire(ref('d'));
    expect(slots.loadedCount).toBe(3);
    now = 5; a.release();
    await flush();
    expect(instant.unloads).toEqual(['b', 'a']);
    c.release(); d.release();
    expect(slots.loadedCount).toBe(2);
  });

  it('reports the first max_loras most recently used as GPU and the host-memory rest as CPU', async () => {
    let now = 0;
    const slots = new AdapterSlots(capacity(1, 2), instantLoader().loader, () => now);
    for (const name of ['a', 'b', 'c']) {
      now += 10;
      (await slots.acquire(ref(name))).release();
    }
    const states = Object.fromEntries(slots.snapshot().map((entry) => [entry.name, entry.state]));
    expect(states).toEqual({ a: 'ADAPTER_STATE_CPU', b: 'ADAPTER_STATE_CPU', c: 'ADAPTER_STATE_GPU' });
    // A fourth exceeds max_loras + max_cpu_loras: the oldest goes.
    now += 10;
    (await slots.acquire(ref('d'))).release();
    expect(slots.snapshot().map((entry) => entry.name).sort()).toEqual(['b', 'c', 'd']);
  });

  it('fails the jobs of an adapter that does not load, shows it FAILED with the reason, and loads it again for the next job', async () => {
    const manual = manualLoader();
    const slots = new AdapterSlots(capacity(2), manual.loader);
    const first = [slots.acquire(ref('bad')), slots.acquire(ref('bad'))];
    await flush();
    manual.fail('bad', adapterLoadFailed('invalid', 'adapter client-bad does not fit this model: wrong shapes'));
    for (const attempt of first) {
      await expect(attempt).rejects.toMatchObject({ code: 'adapter_load_failed', engineStatus: 422, message: 'adapter client-bad does not fit this model: wrong shapes' });
    }
    expect(slots.snapshot()).toEqual([expect.objectContaining({ name: 'bad', state: 'ADAPTER_STATE_FAILED', error: 'adapter client-bad does not fit this model: wrong shapes' })]);
    expect(manual.loads).toEqual(['bad']);
    const retry = slots.acquire(ref('bad'));
    await flush();
    expect(manual.loads).toEqual(['bad', 'bad']);
    manual.finish('bad');
    expect((await retry).handle).toBe('handle-bad');
    expect(slots.snapshot()[0].state).toBe('ADAPTER_STATE_GPU');
  });

  it('turns an unexpected load error into adapter_load_failed without its text (it may hold a path)', async () => {
    const slots = new AdapterSlots(capacity(1), { load: async () => { throw new Error('ENOENT /secret/path/x.gguf'); }, unload: async () => {} });
    const error = await slots.acquire(ref('x')).catch((failure: unknown) => failure) as EngineFailure;
    expect(error).toBeInstanceOf(EngineFailure);
    expect(error).toMatchObject({ code: 'adapter_load_failed', engineStatus: 422 });
    expect(error.message).not.toContain('/secret');
  });

  it('refuses an adapter whose rank is above max_lora_rank, and every adapter when max_loras is 0, without loading', async () => {
    const instant = instantLoader();
    await expect(new AdapterSlots(capacity(2, 0, 16), instant.loader).acquire(ref('big', { rank: 32 })))
      .rejects.toMatchObject({ code: 'adapter_load_failed', engineStatus: 422, message: expect.stringContaining('rank 32, above this replica\'s max_lora_rank 16') });
    await expect(new AdapterSlots(capacity(0), instant.loader).acquire(ref('a'))).rejects.toMatchObject({ code: 'adapter_load_failed' });
    expect(instant.loads()).toBe(0);
  });

  it('forgets an adapter the engine lost, so the next job loads it again', async () => {
    const instant = instantLoader();
    const slots = new AdapterSlots(capacity(2), instant.loader);
    (await slots.acquire(ref('a'))).release();
    slots.forget('a');
    expect(slots.snapshot()).toEqual([]);
    (await slots.acquire(ref('a'))).release();
    expect(instant.loads()).toBe(2);
  });
});
