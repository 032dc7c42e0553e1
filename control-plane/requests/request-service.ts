import { createHash } from 'node:crypto';
import { newId } from '../ids';
import type { Logger } from 'pino';
import { QueryFailedError } from 'typeorm';
import type { CatalogModel } from '../catalog/catalog';
import type { Deployment } from '../deployments/deployment.entity';
import type { ColdStartQueue } from '../dispatch/cold-start-queue';
import type { Dispatcher } from '../dispatch/dispatcher';
import { AppError } from '../errors/app-error';
import type { ControlPlaneEvents } from '../events/control-plane-events';
import { checkWebhookUrl, type WebhookUrlPolicy } from '../network/webhook-url';
import type { DeliveryOptions } from './image-params';
import type { MediaJobs, MediaOutcome } from './media-jobs';
import type { OutputDestinations } from './output-destinations';
import { REQUEST_STATUSES, RequestRecord, type RequestInput, type RequestKind, type RequestModality, type RequestStatus } from './request-record.entity';
import type { RequestRecords } from './request-records';
import type { RequestScheduler } from './request-scheduler';
import { quoteValue } from '../errors/quote-value';

export interface MediaSubmission {
  workspaceId: string;
  apiKeyId: string;
  deployment: Deployment;
  model: CatalogModel;
  kind: RequestKind;
  /** The job body the agent receives. */
  params: Record<string, unknown>;
  outputCount: number;
  responseFormat: 'url' | 'b64_json';
  delivery: DeliveryOptions;
  inputs: Array<{ name: RequestInput['name']; data: Buffer; contentType: string }>;
  idempotencyKey?: string;
  /** The submitting request's span, when traced: the job's run and its webhook continue that trace. */
  traceparent?: string;
}

/** Throws when the request may not spend (the pipeline's admission rules). */
export type MediaAdmission = () => void;

export interface RequestServiceOptions {
  /** An Idempotency-Key dedupes submissions for this long (then it may be used again). @default 86400000 */
  idempotencyTtlMs: number;
  /** Queued records per deployment beyond which submissions get 429 `replica_saturated`. @default 1000 */
  maxQueuedPerDeployment: number;
  webhookUrls: WebhookUrlPolicy;
}

/** Most records one list call returns. */
export const MAX_LIST_LIMIT = 200;

/** Typical seconds one job takes when the catalog says nothing (the acknowledgement's estimate). */
const DEFAULT_JOB_SECONDS = { image: 10, video: 90 } as const;

/**
 * The request-record API the gateway calls: async submission (with Idempotency-Key), sync
 * image calls within a budget, lookups, listing and cancellation. Everything that must hold
 * for every record (workspace isolation, terminal states, no charge on failure) is enforced
 * below this, in RequestRecords and MediaJobs.
 */
export class RequestService {
  constructor(
    private readonly records: RequestRecords,
    private readonly scheduler: RequestScheduler,
    private readonly jobs: MediaJobs,
    private readonly destinations: OutputDestinations,
    private readonly dispatcher: Dispatcher,
    private readonly events: ControlPlaneEvents,
    private readonly options: RequestServiceOptions,
    private readonly logger: Logger,
    /** The clock in milliseconds of records' times and the idempotency window. */
    private readonly now: () => number = Date.now,
    /** A sync call finding no replica waits here (within its budget) while one starts; absent: 503 at once. */
    private readonly coldStarts: Pick<ColdStartQueue, 'wait'> | null = null,
  ) {}

  /**
   * Queues the job (202); a repeated Idempotency-Key with the same request returns the first
   * record. `admission` (the pipeline's rules: credit, a paused deployment) runs after that
   * lookup, before anything is stored.
   */
  async submit(submission: MediaSubmission, admission: MediaAdmission = () => {}): Promise<{ record: RequestRecord; created: boolean }> {
    // A retry of an accepted submission gets its record back before anything that could
    // refuse it now (a full queue, a paused deployment) or upload its inputs again.
    const earlier = submission.idempotencyKey === undefined ? null
      : await this.earlierSubmission(submission.workspaceId, submission.idempotencyKey, requestHash(submission));
    if (earlier) return { record: earlier, created: false };
    admission();
    await this.admit(submission);
    const queued = await this.records.countQueued(submission.deployment.id);
    if (queued >= this.options.maxQueuedPerDeployment) {
      throw new AppError('replica_saturated', `this deployment already has ${this.options.maxQueuedPerDeployment} queued requests; retry later`, { retryAfterSeconds: 30 });
    }
    const record = this.newRecord(submission, 'queued');
    record.estimatedSeconds = this.estimateSeconds(submission, queued);
    await this.storeInputs(record, submission);
    const inserted = await this.insertOnce(record).catch(async (error) => {
      await this.deleteInputs(record);
      throw error;
    });
    if (!inserted.created) {
      await this.deleteInputs(record);
      return inserted;
    }
    this.events.emit('requestUpdated', inserted.record);
    this.scheduler.queued(record.deploymentId);
    return inserted;
  }

  /**
   * A sync image call: runs at once on a free replica and waits at most `budgetMs`; past it the
   * job is canceled, the record fails with `model_timeout`, and `timeoutError` is thrown. With no
   * replica ready (scaled to zero, or one starting) it first waits for one, within the same budget.
   */
  async run(submission: MediaSubmission, budgetMs: number, timeoutError: () => AppError, admission: MediaAdmission = () => {}): Promise<MediaOutcome> {
    if (submission.idempotencyKey !== undefined) {
      throw new AppError('invalid_request', 'Idempotency-Key deduplicates async submissions: add ?async=true, or retry a sync call without the header', { param: 'Idempotency-Key' });
    }
    admission();
    await this.admit(submission);
    const waiting = this.coldStarts?.wait(submission.deployment, null, budgetMs) ?? null;
    if (waiting !== null) budgetMs = Math.max(1, budgetMs - ((await waiting) ?? 0));
    const slot = this.scheduler.reserveSlot(submission.deployment.id);
    const record = this.newRecord(submission, 'running');
    const now = new Date(this.now());
    Object.assign(record, {
      startedAt: now, replicaId: slot.connection.replicaId, estimatedSeconds: Math.ceil(budgetMs / 1000),
      deadlineAt: new Date(now.getTime() + this.jobs.timeoutMs(record)), ...this.scheduler.lease(),
    });
    try {
      await this.storeInputs(record, submission);
      await this.records.insert(record);
    } catch (error) {
      this.scheduler.releaseSlot(slot);
      await this.deleteInputs(record);
      throw error;
    }
    let timer: NodeJS.Timeout | undefined;
    const outcome = await Promise.race([
      this.scheduler.runNow(record, slot),
      new Promise<null>((resolve) => (timer = setTimeout(() => resolve(null), budgetMs))),
    ]);
    clearTimeout(timer);
    if (outcome) return outcome;
    await this.jobs.expire(record.id, 'model_timeout', `the synchronous call did not finish within its ${Math.round(budgetMs / 1000)} s budget; the job was canceled`);
    throw timeoutError();
  }

  async get(workspaceId: string, id: string): Promise<RequestRecord> {
    return await this.records.owned(workspaceId, id);
  }

  /** Newest first. `status` is checked here, for REST and GraphQL alike; `limit` 1–200. */
  async list(deploymentId: string, filter: { status?: string; modality?: RequestModality }, limit: number): Promise<RequestRecord[]> {
    const { status, modality } = filter;
    if (status !== undefined && !REQUEST_STATUSES.includes(status as RequestStatus)) {
      throw new AppError('invalid_request', `status must be one of ${REQUEST_STATUSES.join(', ')}, got ${quoteValue(status)}`, { param: 'status' });
    }
    if (!Number.isInteger(limit) || limit < 1 || limit > MAX_LIST_LIMIT) {
      throw new AppError('invalid_request', `limit must be an integer from 1 to ${MAX_LIST_LIMIT}, got ${quoteValue(limit)}`, { param: 'limit' });
    }
    return await this.records.list(deploymentId, { status: status as RequestStatus | undefined, modality }, limit);
  }

  /** Cancels a queued record; otherwise says why not (the caller maps it to its endpoint's 409). */
  async cancel(workspaceId: string, id: string): Promise<{ record: RequestRecord; canceled: boolean }> {
    await this.records.owned(workspaceId, id);
    const canceled = await this.records.finish(id, ['queued'], 'canceled');
    if (canceled) {
      await this.deleteInputs(canceled);
      this.events.emit('requestUpdated', canceled);
      return { record: canceled, canceled: true };
    }
    return { record: (await this.records.find(id))!, canceled: false };
  }

  /** Fresh presigned links to a succeeded record's files; null when it has none (or they expired). */
  async outputUrls(record: RequestRecord): Promise<string[] | null> {
    if (record.status !== 'succeeded' || record.outputKeys.length === 0 || record.outputsDeletedAt) return null;
    const destination = await this.destinations.forRecord(record).catch((error) => {
      this.logger.warn({ err: error, requestId: record.id }, 'cannot sign links to the outputs of a request');
      return null;
    });
    if (!destination) return null;
    try {
      return await Promise.all(record.outputKeys.map((key) => destination.store.presignGet(key, destination.linkTtlSeconds)));
    } finally {
      destination.release();
    }
  }

  /**
   * Checks of a media request's delivery, for async and sync alike, before anything is stored
   * (the rules every request shares, credit and a paused deployment, the pipeline applied).
   */
  private async admit(submission: MediaSubmission): Promise<void> {
    const { deployment, delivery } = submission;
    if (delivery.webhookUrl !== undefined) await checkWebhookUrl(delivery.webhookUrl, this.options.webhookUrls);
    await this.destinations.check(submission.workspaceId, delivery.storageCredentialId ?? deployment.storageCredentialId ?? null);
  }

  private newRecord(submission: MediaSubmission, status: RequestStatus): RequestRecord {
    const record = this.records.repository.create({
      id: newId('req'),
      workspaceId: submission.workspaceId, deploymentId: submission.deployment.id, apiKeyId: submission.apiKeyId,
      modality: submission.model.modality as 'image' | 'video', kind: submission.kind, modelId: submission.model.id,
      status, sync: status === 'running', params: submission.params, inputs: [],
      responseFormat: submission.responseFormat, outputCount: submission.outputCount,
      storageCredentialId: submission.delivery.storageCredentialId ?? submission.deployment.storageCredentialId ?? null,
      storageProvider: null, outputBucket: null, outputObjectKey: null, outputKeys: [],
      webhookUrl: submission.delivery.webhookUrl ?? null,
      idempotencyKey: submission.idempotencyKey ?? null, requestHash: requestHash(submission),
      errorCode: null, errorMessage: null, progress: 0, estimatedSeconds: 0, replicaId: null,
      leaseOwner: null, leaseExpiresAt: null, deadlineAt: null, billedGpuSeconds: 0,
      queuedAt: new Date(this.now()), startedAt: null, completedAt: null, outputsExpireAt: null, outputsDeletedAt: null,
      traceparent: submission.traceparent ?? null,
    });
    record.inputs = submission.inputs.map((input) => ({
      name: input.name, contentType: input.contentType, objectKey: this.destinations.inputKey(record, input.name),
    }));
    return record;
  }

  private async storeInputs(record: RequestRecord, submission: MediaSubmission): Promise<void> {
    await Promise.all(submission.inputs.map((input, index) =>
      this.destinations.managed.put(record.inputs[index].objectKey, input.data, input.contentType)));
  }

  private async deleteInputs(record: RequestRecord): Promise<void> {
    await Promise.all(record.inputs.map((input) => this.destinations.managed.delete(input.objectKey).catch(() => undefined)));
  }

  /**
   * Inserts, or finds the record an earlier submission with the same Idempotency-Key made
   * (two submissions racing past `submit`'s own look both reach the unique index).
   */
  private async insertOnce(record: RequestRecord): Promise<{ record: RequestRecord; created: boolean }> {
    for (let attempt = 0; ; attempt++) {
      try {
        return { record: await this.records.insert(record), created: true };
      } catch (error) {
        if (!record.idempotencyKey || !isUniqueViolation(error) || attempt > 0) throw error;
      }
      const earlier = await this.earlierSubmission(record.workspaceId, record.idempotencyKey, record.requestHash!);
      if (earlier) return { record: earlier, created: false };
    }
  }

  /**
   * The record an earlier submission with this Idempotency-Key made, for the same request; a
   * different request under that key is refused (422). A key older than the idempotency
   * window is released (null: it may be used again).
   */
  private async earlierSubmission(workspaceId: string, idempotencyKey: string, hash: string): Promise<RequestRecord | null> {
    const existing = await this.records.byIdempotencyKey(workspaceId, idempotencyKey);
    if (!existing) return null;
    if (this.now() - existing.queuedAt.getTime() > this.options.idempotencyTtlMs) {
      await this.records.releaseIdempotencyKey(existing.id, idempotencyKey);
      return null;
    }
    if (existing.requestHash !== hash) {
      throw new AppError('idempotency_key_reused',
        `Idempotency-Key '${idempotencyKey}' was used for a different request (${existing.id}); use a new key for a new request`,
        { param: 'Idempotency-Key' });
    }
    return existing;
  }

  private estimateSeconds(submission: MediaSubmission, ahead: number): number {
    const perJob = submission.model.jobSeconds ?? DEFAULT_JOB_SECONDS[submission.model.modality as 'image' | 'video'];
    const capacity = this.dispatcher.connections(submission.deployment.id)
      .filter((connection) => !connection.draining && !connection.closed)
      .reduce((sum, connection) => sum + connection.maxConcurrency, 0);
    return Math.max(1, Math.ceil(perJob * (Math.floor(ahead / Math.max(1, capacity)) + 1)));
  }
}

/** Same key, same request: the job parameters, delivery options and input bytes all match. */
function requestHash(submission: MediaSubmission): string {
  const hash = createHash('sha256');
  hash.update(JSON.stringify([submission.deployment.id, submission.kind, submission.params, submission.delivery, submission.responseFormat]));
  for (const input of submission.inputs) hash.update(`\n${input.name}:`).update(input.data);
  return hash.digest('hex');
}

function isUniqueViolation(error: unknown): boolean {
  return error instanceof QueryFailedError && (error as QueryFailedError & { driverError?: { code?: string } }).driverError?.code === '23505';
}
