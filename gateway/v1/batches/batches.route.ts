import type { Context } from 'koa';
import { type AuthenticatedKey, type Deployment, parseJsonObject } from '../../../control-plane/api/inference';
import type { BatchService } from '../../../control-plane/api/records';
import { readBody } from '../../http/read-body';
import { requestBudgetOf } from '../../http/request-budget';
import { batchObject, listObject } from './batch-objects';
import { queryLimit, queryValue } from './list-query';
import { idOf, type RouteEndpoints } from '../route-endpoints';
import { traceparentOfContext } from '../../http/request-telemetry';

/**
 * `POST /v1/batches`, `GET /v1/batches`, `GET /v1/batches/{id}`, `POST /v1/batches/{id}/cancel`
 * on a deployment endpoint: OpenAI's Batch API over this deployment's model, run in the
 * capacity its live traffic leaves free (docs/batches.md).
 */
export class BatchesRoute {
  constructor(private readonly batches: BatchService, private readonly options: { maxBodyBytes: number }) {}

  endpoints(): RouteEndpoints {
    return {
      deployment: {
        'batches.create': (context, deployment, key) => this.create(context, deployment, key),
        'batches.list': (context, deployment, key) => this.list(context, deployment, key),
        'batches.retrieve': (context, deployment, key, param) => this.retrieve(context, deployment, key, idOf(param)),
        'batches.cancel': (context, deployment, key, param) => this.cancel(context, deployment, key, idOf(param)),
      },
    };
  }

  async create(context: Context, deployment: Deployment, key: AuthenticatedKey): Promise<void> {
    const fields = parseJsonObject(await readBody(context.req, this.options.maxBodyBytes, requestBudgetOf(context)));
    context.body = batchObject(await this.batches.create(key, deployment, fields, traceparentOfContext(context)));
  }

  /** Newest first; `limit` 1 to 100 (20 by default), `after` a batch id of this list. */
  async list(context: Context, deployment: Deployment, key: AuthenticatedKey): Promise<void> {
    const page = await this.batches.list(key.workspaceId, { deploymentId: deployment.id, after: queryValue(context, 'after'), limit: queryLimit(context, 20, 100) });
    context.body = listObject(page, batchObject);
  }

  async retrieve(context: Context, deployment: Deployment, key: AuthenticatedKey, id: string): Promise<void> {
    context.body = batchObject(await this.batches.get(key.workspaceId, id, deployment.id));
  }

  async cancel(context: Context, deployment: Deployment, key: AuthenticatedKey, id: string): Promise<void> {
    context.body = batchObject(await this.batches.cancel(key.workspaceId, id, deployment.id));
  }
}
