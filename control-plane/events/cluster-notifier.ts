import { randomBytes } from 'node:crypto';
import { Client } from 'pg';
import type { DataSource } from 'typeorm';
import type { Logger } from 'pino';

/**
 * What changed somewhere in the cluster: an API key (by hash, or `*` for all), a deployment
 * (by id), a deployment got queued work, webhook deliveries are due, a delivery attempt was
 * logged (by id, for subscribers on every server), a replica's agent must drain (`<id>|<reason>`,
 * for the server holding its stream), a request record changed (by id) or a replica reported its load
 * (the report as JSON), for subscribers on every server; a batch changed (by id: its subscribers,
 * and the batch runners, which start, stop or finalize its lines); a guest workspace's available
 * credit changed (`<workspace id>|<balance minus holds>`, billing/guest-credit.ts); the operator
 * changed a workspace's budget limits (by workspace id, budgets/workspace-budgets.ts); a background
 * response was cancelled (by id: the server running it cancels its engine job); a replica's agent printed a line
 * (the scrubbed line as JSON, replicas/replica-logs.ts: every server keeps and streams it); a LoRA
 * adapter or its attachments changed (`<workspace id>|<adapter id>`, adapters/adapter-store.ts); requests wait
 * for a first replica of a deployment (by id: the capacity loop, wherever it runs, decides at once;
 * dispatch/cold-start-queue.ts).
 */
export type ClusterTopic =
  | 'api-key' | 'deployment' | 'request-queued' | 'webhook-due' | 'webhook-attempt' | 'replica-drain' | 'request' | 'replica-load' | 'batch'
  | 'guest-credit' | 'budget' | 'response-cancel' | 'replica-log' | 'adapter' | 'cold-start';

export const CLUSTER_CHANNEL = 'platform_cluster';
const CHANNEL = CLUSTER_CHANNEL;

/**
 * A notification sent from inside a transaction with `SELECT pg_notify(CLUSTER_CHANNEL, …)`
 * (delivered on commit, to every server including the sender's).
 */
export function clusterMessage(topic: ClusterTopic, payload = ''): string {
  return `tx|${topic}|${payload}`;
}

export interface ClusterNotifierOptions {
  /** Delay before the listening connection is re-established after it broke. @default 1000 */
  reconnectDelayMs?: number;
}

/**
 * Tells every server instance on the same database that cached state changed, over
 * PostgreSQL LISTEN/NOTIFY: a key regenerated on one server stops working on all of them at
 * once, not after their cache TTL, and subscribers anywhere hear of deployment changes. No
 * extra component: the database is already shared. Own notifications are ignored (the
 * publisher has already updated itself).
 */
export class ClusterNotifier {
  readonly instanceId = randomBytes(6).toString('hex');
  private readonly handlers = new Map<ClusterTopic, Set<(payload: string) => void>>();
  private readonly resetHandlers = new Set<() => void>();
  private listener: Client | null = null;
  private stopped = false;
  /** The last `publishInOrder` notification, which the next one waits for. */
  private ordered: Promise<void> = Promise.resolve();
  private reconnectTimer: NodeJS.Timeout | undefined;

  private constructor(
    private readonly databaseUrl: string,
    private readonly dataSource: DataSource,
    private readonly logger: Logger,
    private readonly options: Required<ClusterNotifierOptions>,
  ) {}

  static async start(databaseUrl: string, dataSource: DataSource, logger: Logger, options: ClusterNotifierOptions = {}): Promise<ClusterNotifier> {
    const notifier = new ClusterNotifier(databaseUrl, dataSource, logger, { reconnectDelayMs: options.reconnectDelayMs ?? 1_000 });
    await notifier.listen();
    return notifier;
  }

  on(topic: ClusterTopic, handler: (payload: string) => void): void {
    const set = this.handlers.get(topic) ?? new Set();
    set.add(handler);
    this.handlers.set(topic, set);
  }

  /** Called after the listening connection came back: notifications may have been missed. */
  onReset(handler: () => void): void {
    this.resetHandlers.add(handler);
  }

  publish(topic: ClusterTopic, payload: string): void {
    this.notify(topic, payload).catch((error) => this.logger.warn({ err: error, topic }, 'could not notify other servers of a change'));
  }

  /**
   * As `publish`, sent only after every earlier `publishInOrder` was: each NOTIFY goes through
   * whichever pooled connection is free, and two sent on different connections may reach the
   * other servers in either order (seen: a replica's log lines 3, 5, 4). For streams whose order
   * matters; it costs one round trip of waiting per message.
   */
  publishInOrder(topic: ClusterTopic, payload: string): void {
    this.ordered = this.ordered
      .then(() => this.notify(topic, payload))
      .catch((error) => this.logger.warn({ err: error, topic }, 'could not notify other servers of a change'));
  }

  private async notify(topic: ClusterTopic, payload: string): Promise<void> {
    await this.dataSource.query('SELECT pg_notify($1, $2)', [CHANNEL, `${this.instanceId}|${topic}|${payload}`]);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.reconnectTimer);
    await this.listener?.end().catch(() => {});
    this.listener = null;
  }

  private async listen(): Promise<void> {
    const client = new Client({ connectionString: this.databaseUrl });
    client.on('notification', (message) => this.deliver(message.payload ?? ''));
    client.on('error', (error) => this.lost(client, error));
    client.on('end', () => this.lost(client, new Error('connection ended')));
    await client.connect();
    await client.query(`LISTEN ${CHANNEL}`);
    this.listener = client;
  }

  private deliver(message: string): void {
    const [origin, topic, ...rest] = message.split('|');
    if (origin === this.instanceId) return;
    const payload = rest.join('|');
    for (const handler of this.handlers.get(topic as ClusterTopic) ?? []) handler(payload);
  }

  private lost(client: Client, error: Error): void {
    if (this.stopped || this.listener !== client) return;
    this.listener = null;
    this.logger.warn({ err: error }, 'lost the cluster notification connection; reconnecting');
    client.end().catch(() => {});
    const retry = () => {
      this.reconnectTimer = setTimeout(() => {
        this.listen().then(() => {
          for (const handler of this.resetHandlers) handler();
        }, () => retry());
      }, this.options.reconnectDelayMs);
      this.reconnectTimer.unref();
    };
    retry();
  }
}
