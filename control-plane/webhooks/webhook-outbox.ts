import { IsNull, type EntityManager } from 'typeorm';
import { CLUSTER_CHANNEL, clusterMessage } from '../events/cluster-notifier';
import { newId } from '../ids';
import type { Batch, BatchStatus } from '../batches/batch.entities';
import type { RequestRecord, RequestStatus } from '../requests/request-record.entity';
import type { ResponseStatus } from '../responses/response-items';
import type { ResponseRecord } from '../responses/response-record.entity';
import { WebhookDelivery, WebhookEndpoint, WebhookEvent, type WebhookEventType } from './webhook.entities';

const EVENT_TYPES: Partial<Record<RequestStatus, WebhookEventType>> = {
  succeeded: 'request.completed',
  failed: 'request.failed',
  canceled: 'request.canceled',
};

const BATCH_EVENT_TYPES: Partial<Record<BatchStatus, WebhookEventType>> = {
  completed: 'batch.completed',
  failed: 'batch.failed',
  expired: 'batch.expired',
  cancelled: 'batch.cancelled',
};

const RESPONSE_EVENT_TYPES: Partial<Record<ResponseStatus, WebhookEventType>> = {
  completed: 'response.completed',
  failed: 'response.failed',
  cancelled: 'response.cancelled',
  incomplete: 'response.incomplete',
};

/**
 * Writes webhook events and their deliveries in the transaction of the state change that
 * causes them (a transactional outbox): a record is terminal if and only if its event exists,
 * whatever crashes afterwards. Bodies carry object keys, never links (links expire; fetch the
 * record for fresh ones).
 */
export class WebhookOutbox {
  /** The terminal hook of request records (RequestRecords.onTerminal). */
  readonly onRequestTerminal = async (manager: EntityManager, record: RequestRecord): Promise<void> => {
    const type = EVENT_TYPES[record.status];
    if (!type) return;
    const endpoints = await manager.find(WebhookEndpoint, { where: { workspaceId: record.workspaceId, enabled: true, deletedAt: IsNull() } });
    const targets: Array<Pick<WebhookDelivery, 'target' | 'endpointId' | 'url'>> = endpoints.map((endpoint) => ({ target: 'endpoint', endpointId: endpoint.id, url: endpoint.url }));
    if (record.webhookUrl) targets.push({ target: 'request_url', endpointId: null, url: record.webhookUrl });
    if (targets.length === 0) return;
    await this.enqueue(manager, record.workspaceId, type, record.id, {
      id: record.id, status: record.status, modality: record.modality,
      output_object_key: record.outputObjectKey, error_code: record.errorCode, error_message: record.errorMessage,
    }, targets, record.traceparent);
  };

  /**
   * The terminal hook of batches (BatchStore.onTerminal): `batch.completed`, `batch.failed`,
   * `batch.expired` or `batch.cancelled` to the workspace's endpoints, in the transaction that
   * ends the batch. The body names the files by id (fetch them with the Files API).
   */
  readonly onBatchTerminal = async (manager: EntityManager, batch: Batch): Promise<void> => {
    const type = BATCH_EVENT_TYPES[batch.status];
    if (!type) return;
    const endpoints = await manager.find(WebhookEndpoint, { where: { workspaceId: batch.workspaceId, enabled: true, deletedAt: IsNull() } });
    if (endpoints.length === 0) return;
    await this.enqueue(manager, batch.workspaceId, type, batch.id, {
      id: batch.id, object: 'batch', status: batch.status, deployment_id: batch.deploymentId, endpoint: batch.endpoint,
      request_counts: { total: batch.totalCount, completed: batch.completedCount, failed: batch.failedCount },
      input_file_id: batch.inputFileId, output_file_id: batch.outputFileId, error_file_id: batch.errorFileId,
    }, endpoints.map((endpoint) => ({ target: 'endpoint' as const, endpointId: endpoint.id, url: endpoint.url })), batch.traceparent);
  };

  /**
   * The terminal hook of background responses (BackgroundQueue.onTerminal): `response.completed`,
   * `response.failed`, `response.cancelled` or `response.incomplete` to the workspace's endpoints,
   * in the transaction that ends the response. The body names it and how it ended; its output is
   * fetched with `GET /v1/responses/{id}` (as OpenAI's webhooks do).
   */
  readonly onResponseTerminal = async (manager: EntityManager, response: ResponseRecord): Promise<void> => {
    const type = RESPONSE_EVENT_TYPES[response.status];
    if (!type) return;
    const endpoints = await manager.find(WebhookEndpoint, { where: { workspaceId: response.workspaceId, enabled: true, deletedAt: IsNull() } });
    if (endpoints.length === 0) return;
    await this.enqueue(manager, response.workspaceId, type, response.id, {
      id: response.id, object: 'response', status: response.status, model: response.model, error: response.error,
      incomplete_details: response.incompleteDetails, usage: response.usage,
    }, endpoints.map((endpoint) => ({ target: 'endpoint' as const, endpointId: endpoint.id, url: endpoint.url })), response.traceparent);
  };

  /** A `webhook.test` event to one endpoint (enabled or not); it never counts toward auto-disable. */
  async enqueueTest(manager: EntityManager, endpoint: WebhookEndpoint): Promise<WebhookDelivery> {
    const [delivery] = await this.enqueue(manager, endpoint.workspaceId, 'webhook.test', null, {
      endpoint_id: endpoint.id, message: 'a test delivery from the console; no request is involved',
    }, [{ target: 'test', endpointId: endpoint.id, url: endpoint.url }]);
    return delivery;
  }

  /** `traceparent`: the record's submission's trace context, when it was traced (each attempt's span continues it). */
  private async enqueue(
    manager: EntityManager, workspaceId: string, type: WebhookEventType, requestId: string | null,
    data: Record<string, unknown>, targets: Array<Pick<WebhookDelivery, 'target' | 'endpointId' | 'url'>>, traceparent: string | null = null,
  ): Promise<WebhookDelivery[]> {
    const eventId = newId('evt');
    const now = new Date();
    await manager.insert(WebhookEvent, { id: eventId, workspaceId, type, requestId, body: JSON.stringify({ id: eventId, type, data }), createdAt: now, traceparent });
    const deliveries = targets.map((target) => manager.create(WebhookDelivery, {
      id: newId('whd'), eventId, workspaceId, ...target, status: 'pending', attempts: 0, nextAttemptAt: now,
      leaseExpiresAt: null, lastStatusCode: null, lastError: null, createdAt: now, completedAt: null,
    }));
    await manager.insert(WebhookDelivery, deliveries);
    // Inside the transaction: every server's delivery loop wakes when (and only if) it commits.
    await manager.query('SELECT pg_notify($1, $2)', [CLUSTER_CHANNEL, clusterMessage('webhook-due')]);
    return deliveries;
  }
}
