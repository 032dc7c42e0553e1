import type { DataSource, Repository } from 'typeorm';
import { IsNull } from 'typeorm';
import { AppError } from '../errors/app-error';
import { newId } from '../ids';
import { WebhookEndpoint } from './webhook.entities';
import { checkWebhookUrl, type WebhookUrlPolicy } from '../network/webhook-url';

export const MAX_ENDPOINTS_PER_WORKSPACE = 20;

export interface EndpointChanges {
  url?: string;
  description?: string;
  enabled?: boolean;
}

/** The URLs a workspace registered; every request event is delivered to each enabled one. */
export class WebhookEndpoints {
  private readonly endpoints: Repository<WebhookEndpoint>;

  constructor(dataSource: DataSource, private readonly urls: WebhookUrlPolicy) {
    this.endpoints = dataSource.getRepository(WebhookEndpoint);
  }

  async create(workspaceId: string, url: string, description = ''): Promise<WebhookEndpoint> {
    await checkWebhookUrl(url, this.urls, 'url');
    if (await this.endpoints.count({ where: { workspaceId, deletedAt: IsNull() } }) >= MAX_ENDPOINTS_PER_WORKSPACE) {
      throw new AppError('invalid_request', `a workspace may register at most ${MAX_ENDPOINTS_PER_WORKSPACE} webhook endpoints`, { param: 'url' });
    }
    return await this.endpoints.save(this.endpoints.create({
      id: newId('whe'), workspaceId, url, description: checkDescription(description), enabled: true,
      disabledReason: null, consecutiveFailures: 0, deletedAt: null,
    }));
  }

  async list(workspaceId: string): Promise<WebhookEndpoint[]> {
    return await this.endpoints.find({ where: { workspaceId, deletedAt: IsNull() }, order: { createdAt: 'ASC' } });
  }

  async get(workspaceId: string, id: string): Promise<WebhookEndpoint> {
    const endpoint = await this.endpoints.findOne({ where: { id, deletedAt: IsNull() } });
    if (!endpoint || endpoint.workspaceId !== workspaceId) throw new AppError('not_found', `no webhook endpoint '${id}' in this workspace`, { param: 'id' });
    return endpoint;
  }

  /** Re-enabling clears the failure count: the endpoint starts afresh. */
  async update(workspaceId: string, id: string, changes: EndpointChanges): Promise<WebhookEndpoint> {
    const endpoint = await this.get(workspaceId, id);
    if (changes.url !== undefined) {
      await checkWebhookUrl(changes.url, this.urls, 'url');
      endpoint.url = changes.url;
    }
    if (changes.description !== undefined) endpoint.description = checkDescription(changes.description);
    if (changes.enabled === true && !endpoint.enabled) {
      Object.assign(endpoint, { enabled: true, disabledReason: null, consecutiveFailures: 0 });
    } else if (changes.enabled === false && endpoint.enabled) {
      Object.assign(endpoint, { enabled: false, disabledReason: 'disabled by a user' });
    }
    return await this.endpoints.save(endpoint);
  }

  /** Soft delete: its delivery log stays readable; pending deliveries to it still finish. */
  async delete(workspaceId: string, id: string): Promise<WebhookEndpoint> {
    const endpoint = await this.get(workspaceId, id);
    endpoint.deletedAt = new Date();
    endpoint.enabled = false;
    return await this.endpoints.save(endpoint);
  }
}

function checkDescription(description: string): string {
  if (description.length > 500) throw new AppError('invalid_request', 'description must be at most 500 characters', { param: 'description' });
  return description;
}
