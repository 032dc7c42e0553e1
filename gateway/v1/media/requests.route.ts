import type { Context } from 'koa';
import { AppError, quoteValue } from '../../../control-plane/api/errors';
import type { AuthenticatedKey, Deployment } from '../../../control-plane/api/inference';
import { MAX_REQUEST_LIST_LIMIT as MAX_LIST_LIMIT, type RecordsPort } from '../../../control-plane/api/records';
import { requestObject } from './media-objects';
import { idOf, type RouteEndpoints } from '../route-endpoints';

const DEFAULT_LIST_LIMIT = 50;

/** `GET /v1/requests`, `GET /v1/requests/{id}`, `POST /v1/requests/{id}/cancel`. */
export class RequestsRoute {
  constructor(private readonly records: Pick<RecordsPort, 'requests'>) {}

  endpoints(): RouteEndpoints {
    return {
      deployment: {
        'requests.list': (context, deployment) => this.list(context, deployment),
        'requests.retrieve': (context, _deployment, key, param) => this.retrieve(context, key, idOf(param)),
        'requests.cancel': (context, _deployment, key, param) => this.cancel(context, key, idOf(param)),
      },
      records: {
        'requests.retrieve': (context, key, param) => this.retrieve(context, key, idOf(param)),
        'requests.cancel': (context, key, param) => this.cancel(context, key, idOf(param)),
      },
    };
  }

  /** Newest first, this deployment's records, without output_urls. */
  async list(context: Context, deployment: Deployment): Promise<void> {
    const { status, limit } = context.query;
    if (Array.isArray(status)) throw new AppError('invalid_request', 'status may be given once', { param: 'status' });
    const count = limit === undefined ? DEFAULT_LIST_LIMIT : Number(limit);
    if (typeof limit !== 'undefined' && (typeof limit !== 'string' || !/^\d+$/.test(limit))) {
      throw new AppError('invalid_request', `limit must be an integer from 1 to ${MAX_LIST_LIMIT}, got ${quoteValue(limit)}`, { param: 'limit' });
    }
    const records = await this.records.requests.list(deployment.id, { status }, count);
    context.body = { object: 'list', data: records.map((record) => requestObject(record)) };
  }

  async retrieve(context: Context, key: AuthenticatedKey, id: string): Promise<void> {
    const requests = this.records.requests;
    const record = await requests.get(key.workspaceId, id);
    context.body = requestObject(record, await requests.outputUrls(record));
  }

  /** 200 with the canceled record when it was queued; 409 `request_not_cancellable` otherwise. */
  async cancel(context: Context, key: AuthenticatedKey, id: string): Promise<void> {
    const { record, canceled } = await this.records.requests.cancel(key.workspaceId, id);
    if (!canceled) throw new AppError('request_not_cancellable', `request ${id} is ${record.status}; only queued requests can be canceled`);
    context.body = requestObject(record, null);
  }
}
