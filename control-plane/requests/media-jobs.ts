import type { Logger } from 'pino';
import type { InputFile, JobKind, UploadTarget } from '../../proto/worker/v1';
import type { SlotHold } from '../dispatch/agent-connection';
import type { Dispatcher } from '../dispatch/dispatcher';
import type { DispatchRequest, Job } from '../dispatch/job';
import type { ControlPlaneEvents } from '../events/control-plane-events';
import { MediaJobListener, type MediaOutcome } from './media-job-listener';
import type { OutputDestination, OutputDestinations } from './output-destinations';
import type { RequestKind, RequestRecord } from './request-record.entity';
import type { RequestRecords } from './request-records';
import { endMediaJobSpan, startMediaJobSpan } from './media-job-span';
import { traceparentOf, type Tracing } from '../../common/tracing/tracing';

export interface MediaJobsOptions {
  /** docs/api-contract.md: an image job may run 5 min… @default 300000 */
  imageTimeoutMs: number;
  /** …a video job 30 min. @default 1800000 */
  videoTimeoutMs: number;
  /** Managed outputs of async requests are deleted this long after completion (docs/api-contract.md: 10 days). */
  managedRetentionMs: number;
  /** Managed outputs of sync calls (only reachable through the returned link) live this long. */
  syncManagedRetentionMs: number;
  /** Progress is written to the record at most this often (every report still reaches subscribers). */
  progressWriteIntervalMs: number;
}

/** Declared beside the listener that builds it; callers of MediaJobs take it from here. */
export type { MediaOutcome };

const JOB_KINDS: Record<RequestKind, JobKind> = {
  'image-generation': 'JOB_KIND_IMAGE_GENERATION',
  'image-edit': 'JOB_KIND_IMAGE_EDIT',
  'video-generation': 'JOB_KIND_VIDEO_GENERATION',
};

/** The file type of a record's outputs. */
export function outputFormat(record: Pick<RequestRecord, 'modality'>): { extension: string; contentType: string } {
  return record.modality === 'video' ? { extension: 'mp4', contentType: 'video/mp4' } : { extension: 'png', contentType: 'image/png' };
}

/**
 * Starts media jobs on agents and owns them until their record is terminal: presigned inputs
 * and upload targets go out with the Assign (agents never hold credentials), the listener
 * records the outcome, and `expire` ends a job that ran out of time or lost its server.
 */
export class MediaJobs {
  private readonly running = new Map<string, { job: Job; listener: MediaJobListener }>();
  private readonly startedListeners: Array<(record: RequestRecord) => void> = [];

  constructor(
    private readonly records: RequestRecords,
    private readonly dispatcher: Dispatcher,
    private readonly destinations: OutputDestinations,
    private readonly events: ControlPlaneEvents,
    private readonly options: MediaJobsOptions,
    private readonly logger: Logger,
    /** The clock in milliseconds of jobs' start times (and their listeners'). */
    private readonly now: () => number = Date.now,
    /** This server's tracing; null when off (a traced submission's job then runs untraced here). */
    private readonly tracing: Tracing | null = null,
  ) {}

  timeoutMs(record: Pick<RequestRecord, 'modality'>): number {
    return record.modality === 'video' ? this.options.videoTimeoutMs : this.options.imageTimeoutMs;
  }

  runningIds(): string[] {
    return [...this.running.keys()];
  }

  /** Resolves once every job this server started has recorded its outcome (shutdown waits for it). */
  async settle(): Promise<void> {
    await Promise.all([...this.running.values()].map((running) => running.listener.settled));
  }

  /** Hears each job this server puts on an agent, its record's `queuedAt` and `startedAt` set (the queue-wait SLO is measured there). */
  onStarted(listener: (record: RequestRecord) => void): void {
    this.startedListeners.push(listener);
  }

  /**
   * Dispatches a `running` record to the replica of `slot`, which the caller reserved (released
   * here once the job is on the agent). Resolves when the record is terminal.
   */
  async start(record: RequestRecord, slot: SlotHold): Promise<MediaOutcome> {
    const { connection } = slot;
    const span = startMediaJobSpan(this.tracing, record, this.now());
    let destination: OutputDestination | null = null;
    let request;
    try {
      destination = await this.destinations.forRecord(record);
      request = await this.prepare(record, destination);
      if (span) request.traceparent = traceparentOf(span);
    } catch (error) {
      slot.release();
      destination?.release();
      this.dispatcher.released(connection);
      const failed = await this.records.finish(record.id, ['running'], 'failed', {
        errorCode: 'storage_upload_failed', errorMessage: `the output storage could not be prepared: ${(error as Error).message}`,
      });
      await this.cleanUp(record, []);
      const terminal = failed ?? (await this.records.find(record.id))!;
      this.events.emit('requestUpdated', terminal);
      if (span) endMediaJobSpan(span, terminal);
      return { record: terminal, inline: [] };
    }
    return await new Promise<MediaOutcome>((resolve) => {
      const listener = new MediaJobListener(record, destination!, request.uploads, {
        records: this.records, events: this.events, logger: this.logger,
        progressWriteIntervalMs: this.options.progressWriteIntervalMs,
        retentionMs: destination!.managed ? (record.sync ? this.options.syncManagedRetentionMs : this.options.managedRetentionMs) : null,
        cleanUp: (keys) => this.cleanUp(record, keys), now: this.now,
      }, (outcome) => {
        this.running.delete(record.id);
        destination!.release();
        if (span) endMediaJobSpan(span, outcome.record);
        resolve(outcome);
      });
      slot.release();
      const job = this.dispatcher.dispatchTo(connection, request, listener);
      this.running.set(record.id, { job, listener });
      for (const started of this.startedListeners) {
        try {
          started(record);
        } catch (error) {
          this.logger.error({ err: error, requestId: record.id }, 'a media job start listener failed');
        }
      }
    });
  }

  /** Ends a queued or running record as failed (deadline, lost server, expired queue, sync budget). */
  async expire(id: string, code: string, message: string): Promise<RequestRecord | null> {
    const running = this.running.get(id);
    if (running) {
      running.listener.failWith(code, message);
      running.job.cancel(code);
      return await running.listener.settled;
    }
    const record = await this.records.finish(id, ['queued', 'running'], 'failed', { errorCode: code, errorMessage: message });
    if (record) {
      await this.cleanUp(record, []);
      this.events.emit('requestUpdated', record);
    }
    return record;
  }

  private async prepare(record: RequestRecord, destination: OutputDestination): Promise<DispatchRequest & { uploads: UploadTarget[] }> {
    const { extension, contentType } = outputFormat(record);
    const timeoutMs = this.timeoutMs(record);
    const startedAt = (record.startedAt ?? new Date(this.now())).getTime();
    // Links outlive the job by a minute so a slow final upload is not refused at the deadline.
    const linkSeconds = Math.ceil(timeoutMs / 1000) + 60;
    const inlineOutputs = record.sync && record.responseFormat === 'b64_json';
    const stored = !(inlineOutputs && destination.managed);
    const uploads: UploadTarget[] = stored
      ? await Promise.all(Array.from({ length: record.outputCount }, async (_, index) => {
        const objectKey = destination.keyFor(index, extension);
        const upload = await destination.store.presignPut(objectKey, contentType, linkSeconds);
        return { url: upload.url, headers: upload.headers, objectKey, contentType };
      }))
      : [];
    const inputs: InputFile[] = await Promise.all(record.inputs.map(async (input) => ({
      name: input.name, contentType: input.contentType,
      url: await this.destinations.managed.presignGet(input.objectKey, linkSeconds),
    })));
    return {
      deploymentId: record.deploymentId, kind: JOB_KINDS[record.kind], body: Buffer.from(JSON.stringify(record.params)),
      stream: false, includeUsage: false, model: record.modelId, deadlineUnixMs: startedAt + timeoutMs,
      inputs, uploads, inlineOutputs,
    };
  }

  /** Inputs are deleted once a job ends; `outputKeys` too when it failed (nothing partial is kept). */
  private async cleanUp(record: RequestRecord, outputKeys: string[]): Promise<void> {
    const managed = this.destinations.managed;
    await Promise.all(record.inputs.map((input) => managed.delete(input.objectKey).catch((error) =>
      this.logger.warn({ err: error, requestId: record.id }, 'could not delete a request input'))));
    if (outputKeys.length === 0) return;
    const destination = await this.destinations.forRecord(record).catch(() => null);
    if (!destination) return;
    await Promise.all(outputKeys.map((key) => destination.store.delete(key).catch(() => undefined)));
    destination.release();
  }
}
