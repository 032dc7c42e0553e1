import type { DataSource } from 'typeorm';
import type { Logger } from 'pino';
import type { ClusterNotifier } from '../events/cluster-notifier';
import type { ControlPlaneEvents } from '../events/control-plane-events';
import type { SecretBox } from '../secret-box';
import type { WebhookConfig } from './webhook-config';
import { WebhookDeliveryLoop } from './webhook-delivery-loop';
import { WebhookEndpoints } from './webhook-endpoints';
import { WebhookOutbox } from './webhook-outbox';
import { WebhookSecrets } from './webhook-secrets';
import { WebhookSender } from './webhook-sender';
import { WebhookService } from './webhook.service';
import { systemResolver } from '../network/public-host';
import type { WebhookUrlPolicy } from '../network/webhook-url';
import type { Tracing } from '../../common/tracing/tracing';

export interface Webhooks {
  readonly service: WebhookService;
  readonly outbox: WebhookOutbox;
  readonly loop: WebhookDeliveryLoop;
  /** Public HTTPS only (plus loopback HTTP when the development switch is on). */
  readonly urlPolicy: WebhookUrlPolicy;
}

/** The webhook parts, wired; the delivery loop starts at once. */
export function startWebhooks(
  config: WebhookConfig, dataSource: DataSource, notifier: ClusterNotifier, events: ControlPlaneEvents,
  box: SecretBox, logger: Logger, tracing: Tracing | null = null,
): Webhooks {
  const urlPolicy: WebhookUrlPolicy = { resolve: systemResolver, allowInsecureLoopback: config.allowInsecureLoopback };
  const secrets = new WebhookSecrets(dataSource, box);
  const outbox = new WebhookOutbox();
  const service = new WebhookService(dataSource, new WebhookEndpoints(dataSource, urlPolicy), secrets, outbox, Math.round(config.rotationGraceHours * 3600));
  const sender = new WebhookSender({ attemptTimeoutMs: config.attemptTimeoutMs, urls: urlPolicy, userAgent: 'inference-platform-webhooks/1' });
  const loop = new WebhookDeliveryLoop(dataSource, sender, secrets, notifier, events, {
    maxAttempts: config.maxAttempts, retryScheduleMs: config.retryScheduleMs, autoDisableAfter: config.autoDisableAfter,
    maxInFlight: config.maxInFlight, leaseMs: config.attemptTimeoutMs + 2_000, idleCheckMs: 30_000,
  }, logger, tracing);
  // Subscribers on every server see attempts logged anywhere.
  notifier.on('webhook-attempt', (id) => {
    void service.attempt(id).then((attempt) => attempt && events.emit('webhookAttemptLogged', attempt), () => {});
  });
  loop.start();
  return { service, outbox, loop, urlPolicy };
}
