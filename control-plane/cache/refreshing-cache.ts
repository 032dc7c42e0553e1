/**
 * The request path's cache of rows it reads on every request (API keys, deployments by slug).
 * Changes reach it as invalidations (this server at once, the others through the cluster
 * notifier); the TTL is the safety net for a notification that never came.
 *
 * What it does that a Map with an expiry did not, both measured on the text path under load:
 * - an entry past its TTL is still served, once more per request, for up to another TTL while
 *   one background load refreshes it, so a busy key or deployment never waits for the
 *   database on a request (every 2–5 s, each such request waited a round trip to a PostgreSQL
 *   that shares the machine);
 * - concurrent misses of one key share a single load (8 connections found the same expired
 *   entry and each ran its own queries).
 * An invalidation wins over a load already running: its result, read before the change, is
 * dropped instead of cached.
 */
export interface RefreshingCacheOptions {
  /** How long a loaded value is served without a refresh; 0 disables caching (every get loads). */
  readonly ttlMs: number;
  /** Entries beyond this many make the cache start over (a flood of unknown keys cannot grow it). */
  readonly maxEntries: number;
  readonly now?: () => number;
  /** Told about a background refresh that failed (the entry stays until it is too stale to serve). */
  readonly onRefreshError?: (error: unknown) => void;
}

interface Entry<V> {
  value: V;
  loadedAt: number;
}

export class RefreshingCache<K, V> {
  private readonly entries = new Map<K, Entry<V>>();
  private readonly loading = new Map<K, Promise<V>>();
  /** Bumped by every invalidation: a load that started before it does not write its result. */
  private generation = 0;
  private readonly now: () => number;

  constructor(private readonly load: (key: K) => Promise<V>, private readonly options: RefreshingCacheOptions) {
    this.now = options.now ?? Date.now;
  }

  async get(key: K): Promise<V> {
    const entry = this.peek(key);
    return entry ? entry.value : await this.refresh(key);
  }

  /**
   * What `get` would answer without waiting (starting the same background refresh of a stale
   * entry), or undefined when it would have to wait for a load. A wrapper, so a cached
   * `undefined` or `null` is told apart from "not known now".
   */
  peek(key: K): { value: V } | undefined {
    if (this.options.ttlMs <= 0) return undefined;
    const entry = this.entries.get(key);
    if (!entry) return undefined;
    const age = this.now() - entry.loadedAt;
    if (age < this.options.ttlMs) return entry;
    if (age < 2 * this.options.ttlMs) {
      this.refresh(key).catch((error) => this.options.onRefreshError?.(error));
      return entry;
    }
    return undefined;
  }

  /** Drops `key` here (the next get loads it again); a load in flight for it is not cached. */
  delete(key: K): void {
    this.generation++;
    this.entries.delete(key);
    this.loading.delete(key);
  }

  clear(): void {
    this.generation++;
    this.entries.clear();
    this.loading.clear();
  }

  get size(): number {
    return this.entries.size;
  }

  /** One load per key at a time; its result is cached unless an invalidation came meanwhile. */
  private refresh(key: K): Promise<V> {
    const running = this.loading.get(key);
    if (running) return running;
    const generation = this.generation;
    const loaded = this.load(key).then((value) => {
      if (this.generation === generation) {
        if (this.entries.size >= this.options.maxEntries) this.entries.clear();
        this.entries.set(key, { value, loadedAt: this.now() });
      }
      return value;
    }).finally(() => {
      if (this.loading.get(key) === loaded) this.loading.delete(key);
    });
    this.loading.set(key, loaded);
    return loaded;
  }
}
