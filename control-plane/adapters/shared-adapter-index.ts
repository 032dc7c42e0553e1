import type { Logger } from 'pino';
import type { AdapterRef } from '../../proto/worker/v1';
import type { ControlPlaneEvents } from '../events/control-plane-events';
import type { SharedAdapter, SharedAdapters } from '../sharing/shared-adapters';
import { SHARED_MODEL_PREFIX } from '../sharing/shared-serving';
import type { ObjectStore } from '../storage/object-store';
import { signedRef } from './adapter-directory';
import type { AdapterChange, AdapterEntry, AdapterStore } from './adapter-store';

interface Indexed extends SharedAdapter {
  readonly entry: AdapterEntry;
}

/**
 * The adapters owners offer to guests of shared serving (docs/adapters.md#sharing), held in
 * memory for the guest path: every guest attempt (a refused one too) resolves `shared/<id>`
 * here without a query. Reloaded whole at once when a shared adapter (or one it holds) changes
 * on any server (the store's `adapterUpdated`, which the cluster notifier relays), and every
 * `refreshMs` in case a notification was missed.
 */
export class SharedAdapterIndex implements SharedAdapters {
  private byId = new Map<string, Indexed>();
  private list: Indexed[] = [];
  private timer: NodeJS.Timeout | undefined;
  private loading: Promise<void> | null = null;
  private again = false;
  private stopped = false;

  constructor(
    private readonly store: Pick<AdapterStore, 'sharedWithGuests'>,
    private readonly events: ControlPlaneEvents,
    private readonly managed: Pick<ObjectStore, 'presignGet'>,
    private readonly options: { minLinkTtlSeconds: number; refreshMs: number },
    private readonly logger: Logger,
    private readonly now: () => number = Date.now,
  ) {}

  async start(): Promise<void> {
    this.events.on('adapterUpdated', this.onChange);
    await this.reload();
    this.timer = setInterval(() => void this.reload(), Math.max(100, this.options.refreshMs));
    this.timer.unref();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.events.off('adapterUpdated', this.onChange);
    clearInterval(this.timer);
    await this.loading;
  }

  find(adapterId: string): SharedAdapter | null {
    return this.byId.get(adapterId) ?? null;
  }

  all(): readonly SharedAdapter[] {
    return this.list;
  }

  async ref(adapter: SharedAdapter, deadlineUnixMs: number): Promise<AdapterRef> {
    // The snapshot the guest was admitted with (its revision), even if a reload replaced it since.
    const { entry } = adapter as Indexed;
    return await signedRef(entry, `${SHARED_MODEL_PREFIX}${adapter.id}`, deadlineUnixMs, this.managed, this.options.minLinkTtlSeconds, this.now);
  }

  /** Only a change that can move the index reloads it: an adapter shared now, or one it holds (unshared, detached, deleted since). */
  private readonly onChange = (change: AdapterChange): void => {
    if (change.adapter.sharedWithGuests || this.byId.has(change.adapter.id)) void this.reload();
  };

  /** One load at a time; a change during one loads again after it. */
  private reload(): Promise<void> {
    if (this.stopped) return Promise.resolve();
    if (this.loading) {
      this.again = true;
      return this.loading;
    }
    this.loading = (async () => {
      do {
        this.again = false;
        try {
          const list = (await this.store.sharedWithGuests()).map((entry): Indexed => ({
            id: entry.adapter.id, baseModel: entry.adapter.baseModel, createdAt: entry.adapter.createdAt, revision: entry.weights.revision,
            deploymentIds: entry.deploymentIds, entry,
          }));
          this.list = list;
          this.byId = new Map(list.map((adapter) => [adapter.id, adapter]));
        } catch (error) {
          this.logger.warn({ err: error }, 'could not reload the shared adapters; keeping the last ones');
        }
      } while (this.again && !this.stopped);
    })().finally(() => (this.loading = null));
    return this.loading;
  }
}
