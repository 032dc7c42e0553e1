import type { Context } from 'koa';
import { AppError, quoteValue } from '../../../control-plane/api/errors';
import type { AuthenticatedKey, Deployment } from '../../../control-plane/api/inference';
import { type BatchService, JSONL_CONTENT_TYPE, MAX_FILE_LIST_LIMIT as MAX_LIST_LIMIT } from '../../../control-plane/api/records';
import { sendObject, type ObjectDownloadOptions } from '../../files/object-download';
import { isMultipart, readMultipart } from '../../http/multipart';
import { requestBudgetOf } from '../../http/request-budget';
import { fileObject, listObject } from './batch-objects';
import { queryLimit, queryValue } from './list-query';
import { idOf, type RouteEndpoints } from '../route-endpoints';

/** Room for the form's other fields and part headers beside the file itself. */
const FORM_OVERHEAD_BYTES = 64 * 1024;

/**
 * `POST /v1/files` (multipart `file` and `purpose`: `batch` or `user_data`), `GET /v1/files`,
 * `GET /v1/files/{id}`, `GET /v1/files/{id}/content`, `DELETE /v1/files/{id}` on a deployment
 * endpoint: the inputs of its batches and their output and error files, and `user_data`
 * uploads (a LoRA adapter's weights, docs/adapters.md#registering).
 */
export class FilesRoute {
  constructor(
    private readonly batches: BatchService,
    private readonly options: { maxFileBytes: number; downloads: ObjectDownloadOptions },
  ) {}

  endpoints(): RouteEndpoints {
    return {
      deployment: {
        'files.create': (context, deployment) => this.create(context, deployment),
        'files.list': (context, deployment, key) => this.list(context, deployment, key),
        'files.retrieve': (context, deployment, key, param) => this.retrieve(context, deployment, key, idOf(param)),
        'files.content': (context, deployment, key, param) => this.content(context, deployment, key, idOf(param)),
        'files.delete': (context, deployment, key, param) => this.delete(context, deployment, key, idOf(param)),
      },
    };
  }

  async create(context: Context, deployment: Deployment): Promise<void> {
    if (!isMultipart(context.req)) {
      throw new AppError('invalid_request', 'POST /v1/files takes multipart/form-data with a `file` and `purpose` ("batch" or "user_data")', { param: 'file' });
    }
    const form = await readMultipart(context.req, this.options.maxFileBytes + FORM_OVERHEAD_BYTES, requestBudgetOf(context));
    if (Object.keys(form.fields).some((name) => name.startsWith('expires_after'))) {
      throw new AppError('invalid_request', 'expires_after is not supported: files are kept until deleted (DELETE /v1/files/{id})', { param: 'expires_after' });
    }
    const files = form.files.get('file') ?? [];
    if (files.length !== 1) throw new AppError('invalid_request', `file is required: exactly one file${files.length > 1 ? `, got ${files.length}` : ''}`, { param: 'file' });
    const extra = [...form.files.keys()].find((name) => name !== 'file');
    if (extra !== undefined) throw new AppError('invalid_request', `only one file, named \`file\`, is taken; got another named ${quoteValue(extra)}`, { param: extra });
    const purpose = form.fields.purpose;
    if (purpose === undefined) {
      throw new AppError('invalid_request', 'purpose is required: "batch" (a batch\'s input) or "user_data" (a LoRA adapter\'s weights)', { param: 'purpose' });
    }
    const file = await this.batches.uploadFile(deployment, { filename: files[0].filename, data: files[0].data, purpose });
    context.body = fileObject(file);
  }

  async list(context: Context, deployment: Deployment, key: AuthenticatedKey): Promise<void> {
    const order = queryValue(context, 'order');
    if (order !== undefined && order !== 'asc' && order !== 'desc') {
      throw new AppError('invalid_request', `order must be "asc" or "desc", got ${quoteValue(order)}`, { param: 'order' });
    }
    const page = await this.batches.files.list(key.workspaceId, deployment.id, {
      purpose: queryValue(context, 'purpose'), after: queryValue(context, 'after'), limit: queryLimit(context, MAX_LIST_LIMIT, MAX_LIST_LIMIT), order,
    });
    context.body = listObject(page, fileObject);
  }

  async retrieve(context: Context, deployment: Deployment, key: AuthenticatedKey, id: string): Promise<void> {
    context.body = fileObject(await this.batches.files.get(key.workspaceId, deployment.id, id));
  }

  /**
   * The raw bytes, as stored, streamed from the object store as the client reads them: JSONL for
   * batch files, `application/octet-stream` for `user_data` (any bytes: an adapter's weights).
   */
  async content(context: Context, deployment: Deployment, key: AuthenticatedKey, id: string): Promise<void> {
    const { file, opened } = await this.batches.files.content(key.workspaceId, deployment.id, id);
    context.type = file.purpose === 'user_data' ? 'application/octet-stream' : JSONL_CONTENT_TYPE;
    await sendObject(context, opened, this.options.downloads);
  }

  async delete(context: Context, deployment: Deployment, key: AuthenticatedKey, id: string): Promise<void> {
    const file = await this.batches.deleteFile(key.workspaceId, id, deployment.id);
    context.body = { id: file.id, object: 'file', deleted: true };
  }
}
