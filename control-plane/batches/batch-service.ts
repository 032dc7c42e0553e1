import type { EntityManager } from 'typeorm';
import type { AuthenticatedKey } from '../api-keys/api-key.service';
import type { Catalog } from '../catalog/catalog';
import type { Deployment } from '../deployments/deployment.entity';
import { AppError } from '../errors/app-error';
import { shortened } from '../errors/quote-value';
import { newId } from '../ids';
import { refuseWithoutCredit } from '../pipeline/admission';
import { Batch, type BatchFile } from './batch.entities';
import { batchEndpointsOf, readBatchCreateInput, type BatchCreateFields } from './batch-create-input';
import type { BatchFilePurge } from './batch-file-purge';
import type { BatchFiles, FileUpload } from './batch-files';
import type { BatchStore } from './batch-store';
import type { CursorPage, PageRequest } from './cursor-page';

/**
 * Where the tenant budget (files, stored bytes and active batches per workspace: batch-quota.ts)
 * is asked: before a file is stored or a batch created (`admit…`), and again inside the
 * transaction that inserts its row (`hold…`, under the workspace's lock); each throws the refusal.
 * UNLIMITED_BATCH_BUDGET admits everything (unit tests of other rules).
 */
export interface BatchBudget {
  /** Before a file of `bytes` is stored for the workspace. */
  admitFile(workspaceId: string, bytes: number): Promise<void>;
  /** Before a batch is created for the workspace. */
  admitBatch(workspaceId: string): Promise<void>;
  holdFile(manager: EntityManager, workspaceId: string, bytes: number): Promise<void>;
  holdBatch(manager: EntityManager, workspaceId: string): Promise<void>;
}

export const UNLIMITED_BATCH_BUDGET: BatchBudget = { admitFile: async () => {}, admitBatch: async () => {}, holdFile: async () => {}, holdBatch: async () => {} };

export interface BatchListRequest extends PageRequest {
  /** Only this deployment's batches; all of the workspace's otherwise. */
  readonly deploymentId?: string;
}

/**
 * Batches as their owners see them (`/batches` of a deployment endpoint, and GraphQL): create
 * one from an uploaded file, read, list, cancel. Running them is the runner's
 * (batch-runner.ts); what changes is told on the event bus as `batchUpdated`. Every call is
 * scoped to a workspace: another workspace's batch is a 404, like one that does not exist.
 */
export class BatchService {
  constructor(
    private readonly store: BatchStore,
    /** The files of deployment endpoints (inputs, outputs and errors of batches). */
    readonly files: BatchFiles,
    private readonly catalog: Pick<Catalog, 'find'>,
    private readonly purge: Pick<BatchFilePurge, 'purge'>,
    private readonly options: { completionWindowMs: number },
    private readonly budget: BatchBudget = UNLIMITED_BATCH_BUDGET,
    private readonly now: () => number = Date.now,
  ) {}

  /**
   * `POST /batches`: the batch is `validating` at once; a runner (on any server) reads its file,
   * then it runs or fails. 400 naming the field for bad input, 402 without credit.
   */
  /** `traceparent`: the create request's span, when traced (its lines link to it, its webhook continues it). */
  async create(key: Pick<AuthenticatedKey, 'id' | 'workspaceId' | 'creditExhausted'>, deployment: Deployment, fields: BatchCreateFields, traceparent?: string): Promise<Batch> {
    const input = readBatchCreateInput(fields, this.catalog.find(deployment.modelId), deployment.modelId);
    refuseWithoutCredit(key);
    await this.budget.admitBatch(key.workspaceId);
    const file = await this.files.find(key.workspaceId, deployment.id, input.inputFileId);
    if (!file) {
      throw new AppError('invalid_request', `input_file_id '${shortened(input.inputFileId)}' is not a file of this deployment endpoint: upload it with POST /v1/files first`, { param: 'input_file_id' });
    }
    if (file.purpose !== 'batch') {
      throw new AppError('invalid_request', `input_file_id '${file.id}' is a batch's output file; a batch's input is a file uploaded with purpose "batch"`, { param: 'input_file_id' });
    }
    const createdAt = new Date(this.now());
    const batch = Object.assign(new Batch(), {
      id: newId('batch'), workspaceId: key.workspaceId, deploymentId: deployment.id, apiKeyId: key.id, endpoint: input.endpoint,
      model: deployment.modelId, inputFileId: file.id, completionWindow: input.completionWindow, status: 'validating', endStatus: null,
      errors: null, outputFileId: null, errorFileId: null, metadata: input.metadata, totalCount: 0, completedCount: 0, failedCount: 0,
      inputTokens: 0, cachedTokens: 0, outputTokens: 0, totalTokens: 0, createdAt, expiresAt: new Date(createdAt.getTime() + this.options.completionWindowMs),
      inProgressAt: null, finalizingAt: null, completedAt: null, failedAt: null, expiredAt: null, cancellingAt: null, cancelledAt: null,
      leaseOwner: null, leaseExpiresAt: null, traceparent: traceparent ?? null,
    } satisfies Batch);
    return await this.store.insert(batch, (manager) => this.budget.holdBatch(manager, key.workspaceId));
  }

  /**
   * `POST /files`: a batch input file for this deployment endpoint. Only deployments that take
   * batches (text and embedding models) take files: elsewhere a file could never be used.
   */
  async uploadFile(deployment: Deployment, upload: FileUpload): Promise<BatchFile> {
    if (batchEndpointsOf(this.catalog.find(deployment.modelId)).length === 0) {
      throw new AppError('invalid_request', `this deployment's model '${deployment.modelId}' takes no batches, so no batch files: files and batches are for chat, completion and embedding models`, { param: 'purpose' });
    }
    await this.budget.admitFile(deployment.workspaceId, upload.data.length);
    return await this.files.upload(deployment, upload, (manager) => this.budget.holdFile(manager, deployment.workspaceId, upload.data.length));
  }

  /**
   * `DELETE /files/{id}`: gone for its owner at once; its bytes now, or once the unfinished
   * batches that read it end (they never break for it).
   */
  async deleteFile(workspaceId: string, id: string, deploymentId?: string): Promise<BatchFile> {
    const file = await this.files.delete(workspaceId, deploymentId, id);
    await this.purge.purge({ fileIds: [file.id] });
    return file;
  }

  /** One batch of the workspace (of this deployment, when given). */
  async get(workspaceId: string, id: string, deploymentId?: string): Promise<Batch> {
    return await this.store.owned(workspaceId, deploymentId, id);
  }

  /** Newest first; `limit` 1 to 100. */
  async list(workspaceId: string, request: BatchListRequest): Promise<CursorPage<Batch>> {
    if (!Number.isInteger(request.limit) || request.limit < 1 || request.limit > 100) {
      throw new AppError('invalid_request', `limit must be an integer from 1 to 100, got ${request.limit}`, { param: 'limit' });
    }
    return await this.store.list(workspaceId, request.deploymentId, request);
  }

  /** `POST /batches/{id}/cancel`: no line starts from now on; running ones finish or are canceled, then the files are written (`cancelled`). */
  async cancel(workspaceId: string, id: string, deploymentId?: string): Promise<Batch> {
    return await this.store.cancel(workspaceId, deploymentId, id);
  }
}
