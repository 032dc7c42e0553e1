import type { DataSource, EntityManager } from 'typeorm';
import type { Logger } from 'pino';
import type { ClusterNotifier } from '../events/cluster-notifier';
import type { ControlPlaneEvents } from '../events/control-plane-events';
import { WebhookAttempt, WebhookDelivery, WebhookEndpoint } from './webhook.entities';
import type { WebhookSecrets } from './webhook-secrets';
import type { AttemptOutcome, WebhookSender } from './webhook-sender';
import { ATTR } from '../../common/tracing/span-attributes';
import { parentOf, SpanKind, SpanStatusCode, traceparentOf, type Span, type Tracing } from '../../common/tracing/tracing';

declare module '../events/control-plane-events' {
  interface ControlPlaneEventMap {
    /** A webhook delivery attempt was logged (on any server: relayed by the cluster notifier). */
    webhookAttemptLogged: [WebhookAttempt];
  }
}

export interface DeliveryLoopOptions {
  /** docs/api-contract.md#webhooks: up to 3 attempts. */
  maxAttempts: number;
  /** Delay before attempt n+1 (docs/api-contract.md: 2 s, 4 s, 8 s); the last entry repeats if attempts outnumber it. */
  retryScheduleMs: readonly number[];
  /** docs/api-contract.md: an endpoint failing about 20 deliveries in a row is disabled. */
  autoDisableAfter: number;
  /** Attempts in flight on this server at once. */
  maxInFlight: number;
  /** A claimed delivery whose server died is due again after this (it outlives one attempt). */
  leaseMs: number;
  /** Longest sleep between looks at the table when nothing wakes the loop. */
  idleCheckMs: number;
}

interface ClaimedDelivery extends WebhookDelivery {
  body: string;
  type: string;
  /** The event's: its record's submission's trace context, or null. */
  traceparent: string | null;
  /** The record the event is about. */
  recordId: string | null;
}

/**
 * Sends due deliveries. Each server claims its batch with FOR UPDATE SKIP LOCKED, so no
 * delivery is sent by two servers at once and none is forgotten: a claim is a lease, and a
 * delivery whose server died mid-attempt is due again when the lease lapses (at-least-once;
 * receivers dedupe on the event id). Woken by NOTIFY from the outbox's transaction, and by a
 * timer set to the next retry that is due.
 */
export class WebhookDeliveryLoop {
  private inFlight = 0;
  private timer: NodeJS.Timeout | undefined;
  private claiming: Promise<void> | null = null;
  private again = false;
  private stopped = false;
  private readonly running = new Set<Promise<void>>();

  constructor(
    private readonly dataSource: DataSource,
    private readonly sender: WebhookSender,
    private readonly secrets: WebhookSecrets,
    private readonly notifier: Pick<ClusterNotifier, 'on' | 'onReset' | 'publish'>,
    private readonly events: ControlPlaneEvents,
    private readonly options: DeliveryLoopOptions,
    private readonly logger: Logger,
    /** This server's tracing; null when off (no attempt makes a span, none carries a traceparent). */
    private readonly tracing: Tracing | null = null,
  ) {}

  start(): void {
    this.notifier.on('webhook-due', () => this.wake());
    // Notifications sent while the listening connection was down are lost: look again.
    this.notifier.onReset(() => this.wake());
    this.wake();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.claiming;
    await Promise.all(this.running);
  }

  /** Looks for due deliveries now (coalesced: a wake during a claim triggers one more claim). */
  wake(): void {
    if (this.stopped) return;
    if (this.claiming) {
      this.again = true;
      return;
    }
    this.claiming = this.claimAndSend()
      .catch((error) => this.logger.error({ err: error }, 'claiming webhook deliveries failed'))
      .finally(() => {
        this.claiming = null;
        if (this.again) {
          this.again = false;
          this.wake();
        }
      });
  }

  private async claimAndSend(): Promise<void> {
    const room = this.options.maxInFlight - this.inFlight;
    if (room > 0) {
      for (const delivery of await this.claim(room)) {
        this.inFlight++;
        const attempt = this.attempt(delivery)
          .catch((error) => this.logger.error({ err: error, deliveryId: delivery.id }, 'webhook attempt could not be recorded'))
          .finally(() => {
            this.inFlight--;
            this.running.delete(attempt);
            this.wake();
          });
        this.running.add(attempt);
      }
    }
    await this.scheduleNextLook();
  }

  private async claim(limit: number): Promise<ClaimedDelivery[]> {
    const result = await this.dataSource.query(`
      UPDATE webhook_deliveries d SET status = 'delivering', attempts = d.attempts + 1,
        lease_expires_at = clock_timestamp() + $2::bigint * interval '1 millisecond'
      FROM webhook_events e
      WHERE e.id = d.event_id AND d.id IN (
        SELECT id FROM webhook_deliveries
        WHERE (status = 'pending' AND next_attempt_at <= clock_timestamp())
           OR (status = 'delivering' AND lease_expires_at < clock_timestamp())
        ORDER BY next_attempt_at LIMIT $1 FOR UPDATE SKIP LOCKED)
      RETURNING d.id, d.event_id, d.workspace_id, d.target, d.endpoint_id, d.url, d.attempts, e.body, e.type, e.traceparent, e.request_id`,
    [limit, this.options.leaseMs]);
    const rows = (Array.isArray(result[0]) ? result[0] : result) as Array<Record<string, any>>;
    return rows.map((row) => Object.assign(new WebhookDelivery(), {
      id: row.id, eventId: row.event_id, workspaceId: row.workspace_id, target: row.target, endpointId: row.endpoint_id,
      url: row.url, attempts: row.attempts, body: row.body, type: row.type, traceparent: row.traceparent, recordId: row.request_id,
    }) as ClaimedDelivery);
  }

  /** Sleeps until the earliest due retry (or lease expiry), bounded by the idle check. */
  private async scheduleNextLook(): Promise<void> {
    if (this.stopped) return;
    const [row] = await this.dataSource.query(`
      SELECT extract(epoch FROM least(
        (SELECT min(next_attempt_at) FROM webhook_deliveries WHERE status = 'pending'),
        (SELECT min(lease_expires_at) FROM webhook_deliveries WHERE status = 'delivering')) - clock_timestamp()) * 1000 AS wait_ms`);
    const waitMs = row.wait_ms === null ? this.options.idleCheckMs : Math.max(0, Math.min(this.options.idleCheckMs, Math.ceil(Number(row.wait_ms))));
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.wake(), waitMs);
    this.timer.unref();
  }

  private async attempt(delivery: ClaimedDelivery): Promise<void> {
    const span = this.attemptSpan(delivery);
    let outcome: AttemptOutcome;
    try {
      const secrets = await this.secrets.signingSecrets(delivery.workspaceId);
      // The receiver gets the attempt's trace context as `traceparent`: a receiver that traces continues the submission's trace.
      outcome = await this.sender.send(delivery.url, delivery.type, delivery.body, secrets, span ? traceparentOf(span) : undefined);
    } catch (error) {
      span?.setStatus({ code: SpanStatusCode.ERROR, message: String(error) }).end();
      throw error;
    }
    if (span) endAttemptSpan(span, outcome);
    const attempt = await this.record(delivery, outcome);
    this.events.emit('webhookAttemptLogged', attempt);
    this.notifier.publish('webhook-attempt', attempt.id);
  }

  /** The attempt's log row, the delivery's new state and the endpoint's failure count, in one transaction. */
  private async record(delivery: ClaimedDelivery, outcome: AttemptOutcome): Promise<WebhookAttempt> {
    return await this.dataSource.transaction(async (manager) => {
      const attempt = await manager.save(manager.create(WebhookAttempt, {
        deliveryId: delivery.id, workspaceId: delivery.workspaceId, attempt: delivery.attempts, url: delivery.url,
        statusCode: outcome.statusCode, error: outcome.error, latencyMs: outcome.latencyMs, succeeded: outcome.succeeded,
        requestBody: delivery.body, signature: outcome.signature, createdAt: new Date(),
      }));
      const finalFailure = !outcome.succeeded && delivery.attempts >= this.options.maxAttempts;
      const retryInMs = this.options.retryScheduleMs[Math.min(delivery.attempts - 1, this.options.retryScheduleMs.length - 1)];
      // Only while this server still holds the claim: had its lease run out, another server has
      // claimed the delivery again, and a late write here would overwrite that newer attempt.
      const updated = await manager.createQueryBuilder().update(WebhookDelivery).set({
        status: outcome.succeeded ? 'succeeded' : finalFailure ? 'failed' : 'pending',
        lastStatusCode: outcome.statusCode, lastError: outcome.error, leaseExpiresAt: null,
        ...(outcome.succeeded || finalFailure
          ? { completedAt: () => 'clock_timestamp()' }
          : { nextAttemptAt: () => `clock_timestamp() + ${Math.max(0, Math.floor(retryInMs))} * interval '1 millisecond'` }),
      }).where("id = :id AND status = 'delivering' AND attempts = :attempts", { id: delivery.id, attempts: delivery.attempts }).execute();
      if (updated.affected && delivery.target === 'endpoint' && delivery.endpointId && (outcome.succeeded || finalFailure)) {
        await this.countForEndpoint(manager, delivery.endpointId, outcome);
      }
      return attempt;
    });
  }

  /** One attempt's span, in the trace of the record the event is about (its submission's); null when untraced. */
  private attemptSpan(delivery: ClaimedDelivery): Span | null {
    const parent = this.tracing ? parentOf(delivery.traceparent) : undefined;
    if (!this.tracing || !parent) return null;
    let host = '';
    try {
      host = new URL(delivery.url).host;
    } catch {
      // A URL the sender will refuse: the span says so through its outcome.
    }
    return this.tracing.startSpan(`webhook ${delivery.type}`, SpanKind.CLIENT, parent, {
      [ATTR.webhookEventType]: delivery.type, [ATTR.webhookAttempt]: delivery.attempts, 'inference.webhook.event_id': delivery.eventId,
      'inference.webhook.delivery_id': delivery.id, [ATTR.recordId]: delivery.recordId ?? '', [ATTR.workspaceId]: delivery.workspaceId,
      [ATTR.serverAddress]: host, [ATTR.httpMethod]: 'POST',
    });
  }

  /** Deliveries (not attempts) in a row: a success resets, a final failure counts, the threshold disables. */
  private async countForEndpoint(manager: EntityManager, endpointId: string, outcome: AttemptOutcome): Promise<void> {
    if (outcome.succeeded) {
      await manager.update(WebhookEndpoint, { id: endpointId }, { consecutiveFailures: 0 });
      return;
    }
    await manager.query(`
      UPDATE webhook_endpoints SET consecutive_failures = consecutive_failures + 1,
        enabled = CASE WHEN consecutive_failures + 1 >= $2 THEN false ELSE enabled END,
        disabled_reason = CASE WHEN enabled AND consecutive_failures + 1 >= $2
          THEN 'disabled automatically after ' || (consecutive_failures + 1) || ' consecutive failed deliveries; last: ' || $3
          ELSE disabled_reason END
      WHERE id = $1`, [endpointId, this.options.autoDisableAfter, (outcome.error ?? 'failed').slice(0, 300)]);
  }
}

function endAttemptSpan(span: Span, outcome: AttemptOutcome): void {
  if (outcome.statusCode !== null) span.setAttribute(ATTR.httpStatus, outcome.statusCode);
  if (!outcome.succeeded) {
    span.setAttribute(ATTR.errorType, outcome.statusCode === null ? 'no_answer' : String(outcome.statusCode));
    span.setStatus({ code: SpanStatusCode.ERROR, message: outcome.error ?? 'failed' });
  }
  span.end();
}
