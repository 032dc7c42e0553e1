import type { Logger } from 'pino';
import type { UploadTarget } from '../../proto/worker/v1';
import type { JobFailure, JobListener } from '../dispatch/job';
import type { ControlPlaneEvents } from '../events/control-plane-events';
import type { OutputDestination } from './output-destinations';
import type { RequestRecord } from './request-record.entity';
import type { RequestRecords } from './request-records';

/** What a finished media job hands back: its terminal record, and the inline bytes of a sync `b64_json` call. */
export interface MediaOutcome {
  record: RequestRecord;
  inline: Buffer[];
}

/**
 * Agent failure codes as the record's `error_code`: the four of docs/api-contract.md#async-failure-codes (`vram_exceeded`,
 * `model_timeout`, `pod_crash`, `storage_upload_failed`), plus `invalid_request` when the engine
 * refused the parameters and `upstream_error` for any other engine failure.
 */
const ERROR_CODES: Record<string, string> = {
  vram_exceeded: 'vram_exceeded',
  model_timeout: 'model_timeout',
  deadline_exceeded: 'model_timeout',
  pod_crash: 'pod_crash',
  storage_upload_failed: 'storage_upload_failed',
  engine_rejected: 'invalid_request',
  invalid_job: 'invalid_request',
};

export interface MediaJobListenerDependencies {
  records: RequestRecords;
  events: ControlPlaneEvents;
  logger: Logger;
  progressWriteIntervalMs: number;
  /** How long stored outputs are kept (managed storage); null keeps them (a customer's bucket). */
  retentionMs: number | null;
  /** Deletes the job's inputs, and the given output keys (a failed job keeps nothing). */
  cleanUp(outputKeys: string[]): Promise<void>;
  /** The clock in milliseconds of progress writes, GPU seconds and output expiry. @default Date.now */
  now?: () => number;
}

/** Records one media job's progress and outcome on its request record; settles exactly once. */
export class MediaJobListener implements JobListener {
  readonly settled: Promise<RequestRecord | null>;
  private readonly now: () => number;
  private resolveSettled!: (record: RequestRecord | null) => void;
  private readonly outputs: Array<{ objectKey: string; data: Buffer | null }> = [];
  private readonly issuedKeys: Set<string>;
  private settling = false;
  private lastProgressWriteAt = 0;
  /** The engine reported progress: the job started, so it is never put back in the queue. */
  private started = false;

  constructor(
    private readonly record: RequestRecord,
    private readonly destination: OutputDestination,
    private readonly uploads: UploadTarget[],
    private readonly dependencies: MediaJobListenerDependencies,
    private readonly onSettled: (outcome: MediaOutcome) => void,
  ) {
    this.now = dependencies.now ?? Date.now;
    this.issuedKeys = new Set(uploads.map((upload) => upload.objectKey));
    this.settled = new Promise((resolve) => (this.resolveSettled = resolve));
  }

  onChunk(): void {}

  onOutput(data: Buffer, _contentType: string, objectKey: string): void {
    if (!this.settling) this.outputs.push({ objectKey, data: data.length > 0 ? data : null });
  }

  onProgress(percent: number): void {
    if (this.settling) return;
    this.started = true;
    const progress = Math.max(0, Math.min(99, Math.floor(percent)));
    this.record.progress = progress;
    this.dependencies.events.emit('requestUpdated', this.record);
    const now = this.now();
    if (now - this.lastProgressWriteAt < this.dependencies.progressWriteIntervalMs) return;
    this.lastProgressWriteAt = now;
    this.dependencies.records.setProgress(this.record.id, progress)
      .catch((error) => this.dependencies.logger.warn({ err: error, requestId: this.record.id }, 'could not record progress'));
  }

  onCompleted(): void {
    this.settle(() => this.succeed());
  }

  onFailed(failure: JobFailure): void {
    if (failure.code === 'agent_draining' && !this.record.sync && !this.started && this.outputs.length === 0) {
      // Refused by a draining agent before anything ran: back to the queue for another replica (or server).
      this.settle(async () => (await this.dependencies.records.requeue(this.record.id)) ?? await this.fail('upstream_error', failure.message));
      return;
    }
    this.settle(() => this.fail(ERROR_CODES[failure.code] ?? 'upstream_error', failure.message || failure.code));
  }

  /** Ends the job as failed now (deadline, lost server, sync budget), whatever the agent says later. */
  failWith(code: string, message: string): void {
    this.settle(() => this.fail(code, message));
  }

  private settle(work: () => Promise<RequestRecord | null>): void {
    if (this.settling) return;
    this.settling = true;
    void (async () => {
      let record: RequestRecord | null = null;
      try {
        record = await work();
      } catch (error) {
        this.dependencies.logger.error({ err: error, requestId: this.record.id }, 'could not record the outcome of a media job');
      }
      const terminal = record ?? (await this.dependencies.records.find(this.record.id).catch(() => null)) ?? this.record;
      this.dependencies.events.emit('requestUpdated', terminal);
      this.resolveSettled(record);
      this.onSettled({ record: terminal, inline: record?.status === 'succeeded' ? this.inline() : [] });
    })();
  }

  private async succeed(): Promise<RequestRecord | null> {
    // Only keys this job was issued count: an agent cannot point a record at someone else's object.
    const keys = this.outputs.map((output) => output.objectKey).filter((key) => this.issuedKeys.has(key));
    const expected = this.record.outputCount;
    if (this.uploads.length > 0 && keys.length !== expected) return await this.fail('upstream_error', `the engine delivered ${keys.length} of ${expected} outputs`);
    if (this.uploads.length === 0 && this.inline().length !== expected) return await this.fail('upstream_error', `the engine returned ${this.inline().length} of ${expected} outputs`);
    const now = this.now();
    const stored = keys.length > 0;
    const record = await this.dependencies.records.finish(this.record.id, ['running'], 'succeeded', {
      progress: 100, outputKeys: keys, outputObjectKey: keys[0] ?? null,
      outputBucket: stored ? this.destination.store.bucket : null, storageProvider: stored ? this.destination.store.provider : null,
      billedGpuSeconds: Math.max(0, (now - (this.record.startedAt ?? new Date(now)).getTime()) / 1000),
      outputsExpireAt: stored && this.dependencies.retentionMs !== null ? new Date(now + this.dependencies.retentionMs) : null,
    });
    // Ended elsewhere meanwhile (its lease was taken over): the outputs belong to nobody.
    await this.dependencies.cleanUp(record ? [] : keys);
    return record;
  }

  private async fail(code: string, message: string): Promise<RequestRecord | null> {
    const record = await this.dependencies.records.finish(this.record.id, ['running'], 'failed', { errorCode: code, errorMessage: message });
    await this.dependencies.cleanUp(this.uploads.map((upload) => upload.objectKey));
    return record;
  }

  private inline(): Buffer[] {
    return this.outputs.flatMap((output) => (output.data ? [output.data] : []));
  }
}
