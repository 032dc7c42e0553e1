import type { DataSource, Repository } from 'typeorm';
import { AppError } from '../errors/app-error';
import { WebhookAttempt, WebhookDelivery } from './webhook.entities';
import type { WebhookEndpoints } from './webhook-endpoints';
import type { WebhookOutbox } from './webhook-outbox';
import type { RevealedSecret, WebhookSecrets } from './webhook-secrets';

export interface DeliveryFilter {
  endpointId?: string;
  requestId?: string;
  limit: number;
}

/** What the console does with webhooks: endpoints, the signing secret, test sends and the delivery log. */
/** A delivery and the type of the event it carries. */
export type DeliveryWithType = WebhookDelivery & { eventType: string };

export class WebhookService {
  private readonly deliveries: Repository<WebhookDelivery>;
  private readonly attempts: Repository<WebhookAttempt>;

  constructor(
    private readonly dataSource: DataSource,
    readonly endpoints: WebhookEndpoints,
    private readonly secrets: WebhookSecrets,
    private readonly outbox: WebhookOutbox,
    private readonly rotationGraceSeconds: number,
  ) {
    this.deliveries = dataSource.getRepository(WebhookDelivery);
    this.attempts = dataSource.getRepository(WebhookAttempt);
  }

  revealSecret(workspaceId: string): Promise<RevealedSecret> {
    return this.secrets.reveal(workspaceId);
  }

  rotateSecret(workspaceId: string, graceSeconds = this.rotationGraceSeconds): Promise<RevealedSecret> {
    if (!Number.isInteger(graceSeconds) || graceSeconds < 0 || graceSeconds > 7 * 86_400) {
      throw new AppError('invalid_request', 'graceSeconds must be an integer from 0 to 604800 (7 days)', { param: 'graceSeconds' });
    }
    return this.secrets.rotate(workspaceId, graceSeconds);
  }

  /** Queues a `webhook.test` delivery to the endpoint (enabled or not); it never counts toward auto-disable. */
  async sendTest(workspaceId: string, endpointId: string): Promise<DeliveryWithType> {
    const endpoint = await this.endpoints.get(workspaceId, endpointId);
    const delivery = await this.dataSource.transaction((manager) => this.outbox.enqueueTest(manager, endpoint));
    return Object.assign(delivery, { eventType: 'webhook.test' });
  }

  /** Newest first. */
  async listDeliveries(workspaceId: string, filter: DeliveryFilter): Promise<DeliveryWithType[]> {
    if (!Number.isInteger(filter.limit) || filter.limit < 1 || filter.limit > 200) {
      throw new AppError('invalid_request', 'limit must be an integer from 1 to 200', { param: 'limit' });
    }
    const query = this.deliveries.createQueryBuilder('delivery').where('delivery.workspace_id = :workspaceId', { workspaceId });
    if (filter.endpointId) query.andWhere('delivery.endpoint_id = :endpointId', { endpointId: filter.endpointId });
    if (filter.requestId) {
      query.innerJoin('webhook_events', 'event', 'event.id = delivery.event_id').andWhere('event.request_id = :requestId', { requestId: filter.requestId });
    }
    return await this.withEventTypes(await query.orderBy('delivery.created_at', 'DESC').addOrderBy('delivery.id', 'DESC').limit(filter.limit).getMany());
  }

  async delivery(workspaceId: string, id: string): Promise<DeliveryWithType> {
    const delivery = await this.deliveries.findOne({ where: { id } });
    if (!delivery || delivery.workspaceId !== workspaceId) throw new AppError('not_found', `no webhook delivery '${id}' in this workspace`, { param: 'id' });
    const [typed] = await this.withEventTypes([delivery]);
    return typed;
  }

  /** Each delivery with its event's type, in one query for the whole page. */
  private async withEventTypes(deliveries: WebhookDelivery[]): Promise<DeliveryWithType[]> {
    if (deliveries.length === 0) return [];
    const rows: Array<{ id: string; type: string }> = await this.dataSource.query(
      'SELECT id, type FROM webhook_events WHERE id = ANY($1)', [[...new Set(deliveries.map((delivery) => delivery.eventId))]]);
    const types = new Map(rows.map((row) => [row.id, row.type]));
    return deliveries.map((delivery) => Object.assign(delivery, { eventType: types.get(delivery.eventId) ?? 'unknown' }));
  }

  async attemptsOf(deliveryId: string): Promise<WebhookAttempt[]> {
    return await this.attempts.find({ where: { deliveryId }, order: { attempt: 'ASC', id: 'ASC' } });
  }

  async attempt(id: string): Promise<WebhookAttempt | null> {
    return await this.attempts.findOne({ where: { id } });
  }
}
