import { RefreshingCache } from '../../control-plane/cache/refreshing-cache';

/** A load whose answers the test releases one at a time. */
function controlledLoad() {
  const calls: Array<{ key: string; resolve: (value: string) => void; reject: (error: Error) => void }> = [];
  const load = (key: string) => new Promise<string>((resolve, reject) => calls.push({ key, resolve, reject }));
  return { calls, load };
}

describe('RefreshingCache', () => {
  let clock = 0;
  const now = () => clock;
  beforeEach(() => (clock = 1_000));

  test('concurrent misses of one key share one load', async () => {
    const { calls, load } = controlledLoad();
    const cache = new RefreshingCache(load, { ttlMs: 100, maxEntries: 10, now });
    const gets = Array.from({ length: 8 }, () => cache.get('a'));
    expect(calls).toHaveLength(1);
    calls[0].resolve('A1');
    expect(await Promise.all(gets)).toEqual(Array(8).fill('A1'));
    expect(await cache.get('a')).toBe('A1');
    expect(calls).toHaveLength(1);
  });

  test('past the TTL the old value is served while one background load refreshes it', async () => {
    const { calls, load } = controlledLoad();
    const cache = new RefreshingCache(load, { ttlMs: 100, maxEntries: 10, now });
    const first = cache.get('a');
    calls[0].resolve('A1');
    await first;
    clock += 150;
    expect(await cache.get('a')).toBe('A1');
    expect(await cache.get('a')).toBe('A1');
    expect(calls).toHaveLength(2);
    calls[1].resolve('A2');
    await new Promise((resolve) => setImmediate(resolve));
    expect(await cache.get('a')).toBe('A2');
    expect(calls).toHaveLength(2);
  });

  test('a value older than twice the TTL is not served: the get waits for the load', async () => {
    const { calls, load } = controlledLoad();
    const cache = new RefreshingCache(load, { ttlMs: 100, maxEntries: 10, now });
    const first = cache.get('a');
    calls[0].resolve('A1');
    await first;
    clock += 250;
    let answered: string | undefined;
    const second = cache.get('a').then((value) => (answered = value));
    await new Promise((resolve) => setImmediate(resolve));
    expect(answered).toBeUndefined();
    calls[1].resolve('A2');
    await second;
    expect(answered).toBe('A2');
  });

  test('an invalidation during a load keeps its (older) result out of the cache', async () => {
    const { calls, load } = controlledLoad();
    const cache = new RefreshingCache(load, { ttlMs: 100, maxEntries: 10, now });
    const before = cache.get('a');
    cache.delete('a');
    calls[0].resolve('read before the change');
    expect(await before).toBe('read before the change');
    const after = cache.get('a');
    expect(calls).toHaveLength(2);
    calls[1].resolve('read after the change');
    expect(await after).toBe('read after the change');
    expect(await cache.get('a')).toBe('read after the change');
  });

  test('a failed refresh keeps the entry until it is too stale, then the failure reaches the caller', async () => {
    const { calls, load } = controlledLoad();
    const errors: unknown[] = [];
    const cache = new RefreshingCache(load, { ttlMs: 100, maxEntries: 10, now, onRefreshError: (error) => errors.push(error) });
    const first = cache.get('a');
    calls[0].resolve('A1');
    await first;
    clock += 150;
    expect(await cache.get('a')).toBe('A1');
    calls[1].reject(new Error('database gone'));
    await new Promise((resolve) => setImmediate(resolve));
    expect(errors).toHaveLength(1);
    clock += 100;
    const late = cache.get('a');
    calls[2].reject(new Error('database still gone'));
    await expect(late).rejects.toThrow('database still gone');
  });

  test('a TTL of 0 loads on every get', async () => {
    let loads = 0;
    const cache = new RefreshingCache(async () => ++loads, { ttlMs: 0, maxEntries: 10, now });
    await cache.get('a');
    await cache.get('a');
    expect(loads).toBe(2);
  });

  test('more keys than maxEntries start the cache over instead of growing it', async () => {
    const cache = new RefreshingCache(async (key: string) => key, { ttlMs: 100, maxEntries: 3, now });
    for (const key of ['a', 'b', 'c', 'd']) await cache.get(key);
    expect(cache.size).toBeLessThanOrEqual(3);
  });

  test('peek answers without waiting what get would: nothing before a load, the value while fresh or stale (starting the refresh), nothing when too stale or disabled', async () => {
    const { calls, load } = controlledLoad();
    const cache = new RefreshingCache<string, string | null>(load as (key: string) => Promise<string | null>, { ttlMs: 100, maxEntries: 10, now });
    expect(cache.peek('a')).toBeUndefined();
    expect(calls).toHaveLength(0);
    const loading = cache.get('a');
    calls[0].resolve(null as unknown as string);
    await loading;
    // A cached null is an answer (an unknown key), told apart from "not known now".
    expect(cache.peek('a')).toMatchObject({ value: null });
    clock += 150;
    expect(cache.peek('a')).toMatchObject({ value: null });
    expect(calls).toHaveLength(2);
    expect(cache.peek('a')).toMatchObject({ value: null });
    expect(calls).toHaveLength(2);
    clock += 100;
    expect(cache.peek('a')).toBeUndefined();
    const disabled = new RefreshingCache(load, { ttlMs: 0, maxEntries: 10, now });
    expect(disabled.peek('a')).toBeUndefined();
  });
});
