/**
 * MediaJobListener: one media job's events become exactly one outcome on its record —
 * succeeded only with every issued output delivered (foreign keys ignored), failed with the
 * agent's code mapped to the record's vocabulary, or back in the queue when a draining agent
 * refused it before anything ran; whichever event comes first wins, later ones change nothing;
 * progress is clamped, published on every report and written at most once per interval.
 * The record table is an in-memory fake with the real table's conditional transitions
 * (`finish` only from the listed statuses); the clock is the listener's `now` (and the fake table's `Date.now`), stubbed.
 */
import type { UploadTarget } from '../../../proto/worker/v1';
import type { JobFailure } from '../../../control-plane/dispatch/job';
import { ControlPlaneEvents } from '../../../control-plane/events/control-plane-events';
import type { MediaOutcome } from '../../../control-plane/requests/media-jobs';
import { MediaJobListener } from '../../../control-plane/requests/media-job-listener';
import type { OutputDestination } from '../../../control-plane/requests/output-destinations';
import type { RequestRecord, RequestStatus } from '../../../control-plane/requests/request-record.entity';
import type { RequestRecords, TerminalPatch } from '../../../control-plane/requests/request-records';
import { flush, recordingLogger } from './fakes';

const T0 = 1_700_000_000_000;
const RETENTION_MS = 10 * 24 * 3600 * 1000;
const PROGRESS_INTERVAL_MS = 1_000;

/** request_records with the real table's rule: a status change happens only from the statuses it names. */
class FakeRecordTable {
  readonly rows = new Map<string, RequestRecord>();
  readonly finishes: Array<{ id: string; from: RequestStatus[]; to: string; patch: TerminalPatch }> = [];
  readonly progressWrites: number[] = [];
  requeues = 0;
  failFinish = false;
  failProgress = false;

  async find(id: string): Promise<RequestRecord | null> {
    const row = this.rows.get(id);
    return row ? { ...row } : null;
  }

  async finish(id: string, from: RequestStatus[], to: 'succeeded' | 'failed' | 'canceled', patch: TerminalPatch = {}): Promise<RequestRecord | null> {
    this.finishes.push({ id, from, to, patch });
    if (this.failFinish) throw new Error('database unreachable');
    const row = this.rows.get(id);
    if (!row || !from.includes(row.status)) return null;
    Object.assign(row, patch, { status: to, completedAt: new Date(Date.now()) });
    return { ...row };
  }

  async requeue(id: string): Promise<RequestRecord | null> {
    this.requeues++;
    const row = this.rows.get(id);
    if (!row || row.status !== 'running' || row.sync) return null;
    Object.assign(row, { status: 'queued', startedAt: null, replicaId: null, progress: 0 });
    return { ...row };
  }

  async setProgress(id: string, progress: number): Promise<void> {
    if (this.failProgress) throw new Error('database unreachable');
    if (this.rows.get(id)?.status === 'running') this.progressWrites.push(progress);
  }
}

function runningRecord(overrides: Partial<RequestRecord> = {}): RequestRecord {
  return {
    id: 'req_1', workspaceId: 'ws', deploymentId: 'dep_img', modality: 'image', kind: 'image-generation', status: 'running',
    sync: false, outputCount: 2, progress: 0, startedAt: new Date(T0 - 12_500), responseFormat: 'url', inputs: [],
    ...overrides,
  } as RequestRecord;
}

function uploadsFor(count: number): UploadTarget[] {
  return Array.from({ length: count }, (_, index) => ({ url: `https://store/put/${index}`, headers: {}, objectKey: `ws/req_1/${index}.png`, contentType: 'image/png' }));
}

const destination = {
  store: { bucket: 'managed-outputs', provider: 's3' }, managed: true, linkTtlSeconds: 3600, keyFor: () => '', release: () => {},
} as unknown as OutputDestination;

function failure(code: string, message = `${code}: details`): JobFailure {
  return { code, message, engineStatus: 0, engineBody: null, usage: undefined };
}

let now = T0;
beforeEach(() => {
  now = T0;
  jest.spyOn(Date, 'now').mockImplementation(() => now);
});
afterEach(() => jest.restoreAllMocks());

function listen(options: { record?: Partial<RequestRecord>; uploads?: UploadTarget[]; retentionMs?: number | null } = {}) {
  const table = new FakeRecordTable();
  const record = runningRecord(options.record);
  table.rows.set(record.id, { ...record });
  const bus = new ControlPlaneEvents();
  const published: Array<{ status: string; progress: number }> = [];
  bus.on('requestUpdated', (updated) => published.push({ status: updated.status, progress: updated.progress }));
  const cleanedUp: string[][] = [];
  const outcomes: MediaOutcome[] = [];
  const log = recordingLogger();
  const uploads = options.uploads ?? uploadsFor(record.outputCount);
  const listener = new MediaJobListener(record, destination, uploads, {
    records: table as unknown as RequestRecords, events: bus, logger: log.logger, progressWriteIntervalMs: PROGRESS_INTERVAL_MS,
    retentionMs: options.retentionMs === undefined ? RETENTION_MS : options.retentionMs,
    cleanUp: async (keys) => {
      cleanedUp.push(keys);
    },
    now: () => now,
  }, (outcome) => outcomes.push(outcome));
  /** The record as stored now. */
  const stored = () => table.rows.get(record.id)!;
  return { table, listener, published, cleanedUp, outcomes, log, uploads, stored };
}

describe('MediaJobListener success', () => {
  test('every issued output delivered: succeeded with its keys, bucket, GPU time and expiry, settled once', async () => {
    const { listener, table, outcomes, cleanedUp, published, stored } = listen();
    listener.onOutput(Buffer.alloc(0), 'image/png', 'ws/req_1/0.png');
    listener.onOutput(Buffer.alloc(0), 'image/png', 'ws/req_1/1.png');
    listener.onCompleted();
    const settled = await listener.settled;
    expect(table.finishes).toEqual([{
      id: 'req_1', from: ['running'], to: 'succeeded', patch: {
        progress: 100, outputKeys: ['ws/req_1/0.png', 'ws/req_1/1.png'], outputObjectKey: 'ws/req_1/0.png',
        outputBucket: 'managed-outputs', storageProvider: 's3', billedGpuSeconds: 12.5, outputsExpireAt: new Date(T0 + RETENTION_MS),
      },
    }]);
    expect(settled).toMatchObject({ status: 'succeeded' });
    expect(stored().status).toBe('succeeded');
    expect(cleanedUp).toEqual([[]]); // inputs only: the outputs are the result
    expect(outcomes).toHaveLength(1);
    expect(outcomes[0]).toMatchObject({ record: { status: 'succeeded' }, inline: [] });
    expect(published).toEqual([{ status: 'succeeded', progress: 100 }]);
  });

  test('outputs in a customer\'s bucket never expire', async () => {
    const { listener, table } = listen({ record: { outputCount: 1 }, retentionMs: null });
    listener.onOutput(Buffer.alloc(0), 'image/png', 'ws/req_1/0.png');
    listener.onCompleted();
    await listener.settled;
    expect(table.finishes[0].patch.outputsExpireAt).toBeNull();
  });

  test('inline outputs (sync b64_json on managed storage) come back in the outcome; nothing is stored', async () => {
    const { listener, table, outcomes } = listen({ record: { outputCount: 2, sync: true, responseFormat: 'b64_json' }, uploads: [] });
    listener.onOutput(Buffer.from('png-0'), 'image/png', '');
    listener.onOutput(Buffer.from('png-1'), 'image/png', '');
    listener.onCompleted();
    await listener.settled;
    expect(table.finishes[0]).toMatchObject({ to: 'succeeded', patch: { outputKeys: [], outputObjectKey: null, outputBucket: null, storageProvider: null, outputsExpireAt: null } });
    expect(outcomes[0].inline.map((data) => data.toString())).toEqual(['png-0', 'png-1']);
  });

  test.each<[string, { outputCount: number; uploads: number }, Array<[string, string]>, string]>([
    ['an issued output missing', { outputCount: 2, uploads: 2 }, [['', 'ws/req_1/0.png']], 'the engine delivered 1 of 2 outputs'],
    ['a key this job was never issued (another workspace\'s object)', { outputCount: 2, uploads: 2 },
      [['', 'ws/req_1/0.png'], ['', 'other-ws/req_9/0.png']], 'the engine delivered 1 of 2 outputs'],
    ['an inline output missing', { outputCount: 2, uploads: 0 }, [['png', '']], 'the engine returned 1 of 2 outputs'],
    ['an empty inline output', { outputCount: 1, uploads: 0 }, [['', '']], 'the engine returned 0 of 1 outputs'],
  ])('completed with %s: failed upstream_error, and what was uploaded is deleted', async (_name, shape, outputs, message) => {
    const uploads = uploadsFor(shape.uploads);
    const { listener, table, cleanedUp, outcomes } = listen({ record: { outputCount: shape.outputCount }, uploads });
    for (const [data, key] of outputs) listener.onOutput(Buffer.from(data), 'image/png', key);
    listener.onCompleted();
    await listener.settled;
    expect(table.finishes).toEqual([{ id: 'req_1', from: ['running'], to: 'failed', patch: { errorCode: 'upstream_error', errorMessage: message } }]);
    expect(cleanedUp).toEqual([uploads.map((upload) => upload.objectKey)]);
    expect(outcomes).toHaveLength(1);
    expect(outcomes[0]).toMatchObject({ record: { status: 'failed' }, inline: [] });
  });

  test('a record ended elsewhere meanwhile (lease taken over) keeps its outcome; this job\'s outputs are deleted', async () => {
    const { listener, stored, cleanedUp, outcomes } = listen({ record: { outputCount: 1 } });
    Object.assign(stored(), { status: 'failed', errorCode: 'pod_crash' });
    listener.onOutput(Buffer.alloc(0), 'image/png', 'ws/req_1/0.png');
    listener.onCompleted();
    expect(await listener.settled).toBeNull();
    expect(cleanedUp).toEqual([['ws/req_1/0.png']]);
    expect(outcomes[0]).toMatchObject({ record: { status: 'failed', errorCode: 'pod_crash' }, inline: [] });
  });
});

describe('MediaJobListener failures', () => {
  test.each<[string, string]>([
    ['vram_exceeded', 'vram_exceeded'],
    ['model_timeout', 'model_timeout'],
    ['deadline_exceeded', 'model_timeout'],
    ['pod_crash', 'pod_crash'],
    ['storage_upload_failed', 'storage_upload_failed'],
    ['engine_rejected', 'invalid_request'],
    ['invalid_job', 'invalid_request'],
    ['engine_error', 'upstream_error'],
    ['engine_unavailable', 'upstream_error'],
    ['canceled', 'upstream_error'],
    ['something_new', 'upstream_error'],
  ])('agent failure %s is recorded as %s, keeping its message; issued outputs are deleted', async (code, recorded) => {
    const { listener, table, cleanedUp, outcomes, uploads } = listen();
    listener.onFailed(failure(code));
    await listener.settled;
    expect(table.finishes).toEqual([{ id: 'req_1', from: ['running'], to: 'failed', patch: { errorCode: recorded, errorMessage: `${code}: details` } }]);
    expect(cleanedUp).toEqual([uploads.map((upload) => upload.objectKey)]);
    expect(outcomes).toHaveLength(1);
  });

  test('a failure without a message records its code as the message', async () => {
    const { listener, table } = listen();
    listener.onFailed(failure('vram_exceeded', ''));
    await listener.settled;
    expect(table.finishes[0].patch).toEqual({ errorCode: 'vram_exceeded', errorMessage: 'vram_exceeded' });
  });

  test('failWith ends the job with the given code (deadline, lost server, sync budget)', async () => {
    const { listener, table } = listen();
    listener.failWith('image_generation_timeout', 'the sync budget ran out');
    await listener.settled;
    expect(table.finishes[0].patch).toEqual({ errorCode: 'image_generation_timeout', errorMessage: 'the sync budget ran out' });
  });

  test('an async job a draining agent refused before it ran goes back to the queue, not to failed', async () => {
    const { listener, table, stored, outcomes, published, cleanedUp } = listen();
    listener.onFailed(failure('agent_draining'));
    const settled = await listener.settled;
    expect(table.requeues).toBe(1);
    expect(table.finishes).toEqual([]);
    expect(stored().status).toBe('queued');
    expect(settled).toMatchObject({ status: 'queued' });
    expect(outcomes).toEqual([{ record: expect.objectContaining({ status: 'queued' }), inline: [] }]);
    expect(published).toEqual([{ status: 'queued', progress: 0 }]); // the scheduler claims it again on this event
    expect(cleanedUp).toEqual([]); // inputs stay: it will run
  });

  test.each<[string, { sync?: boolean }, (listener: MediaJobListener) => void]>([
    ['a sync call (its client is waiting: no second run)', { sync: true }, () => {}],
    ['a job that reported progress (the engine started it)', {}, (listener) => listener.onProgress(5)],
    ['a job that delivered an output', {}, (listener) => listener.onOutput(Buffer.alloc(0), 'image/png', 'ws/req_1/0.png')],
  ])('a draining refusal of %s fails it with upstream_error', async (_name, record, before) => {
    const { listener, table, stored } = listen({ record });
    before(listener);
    listener.onFailed(failure('agent_draining'));
    await listener.settled;
    expect(table.requeues).toBe(0);
    expect(table.finishes.map((finish) => [finish.to, finish.patch.errorCode])).toEqual([['failed', 'upstream_error']]);
    expect(stored().status).toBe('failed');
  });

  test('a draining refusal of a record that ended elsewhere meanwhile changes nothing and reports the stored outcome', async () => {
    const { listener, table, stored, outcomes } = listen();
    Object.assign(stored(), { status: 'failed', errorCode: 'pod_crash' });
    listener.onFailed(failure('agent_draining', 'the agent is draining'));
    expect(await listener.settled).toBeNull();
    expect(table.requeues).toBe(1);
    expect(table.finishes.map((finish) => finish.patch)).toEqual([{ errorCode: 'upstream_error', errorMessage: 'the agent is draining' }]);
    expect(stored()).toMatchObject({ status: 'failed', errorCode: 'pod_crash' });
    expect(outcomes).toEqual([{ record: expect.objectContaining({ status: 'failed', errorCode: 'pod_crash' }), inline: [] }]);
  });

  test('when the outcome cannot be written, the error is logged and the stored record is reported', async () => {
    const { listener, table, outcomes, log, published } = listen();
    table.failFinish = true;
    listener.onFailed(failure('pod_crash'));
    expect(await listener.settled).toBeNull();
    expect(log.errors).toEqual(['could not record the outcome of a media job']);
    expect(outcomes).toEqual([{ record: expect.objectContaining({ id: 'req_1', status: 'running' }), inline: [] }]);
    expect(published).toHaveLength(1);
  });
});

describe('MediaJobListener settles exactly once', () => {
  type Step = (listener: MediaJobListener) => void;
  const completed: Step = (listener) => listener.onCompleted();
  const failed: Step = (listener) => listener.onFailed(failure('pod_crash'));
  const draining: Step = (listener) => listener.onFailed(failure('agent_draining'));
  const expired: Step = (listener) => listener.failWith('model_timeout', 'deadline passed');
  const outputs: Step = (listener) => {
    listener.onOutput(Buffer.alloc(0), 'image/png', 'ws/req_1/0.png');
    listener.onOutput(Buffer.alloc(0), 'image/png', 'ws/req_1/1.png');
  };

  test.each<[string, Step[], string]>([
    ['completed, then failed', [outputs, completed, failed], 'succeeded'],
    ['failed, then completed', [outputs, failed, completed], 'failed:pod_crash'],
    ['expired (failWith), then the agent\'s completion', [outputs, expired, completed], 'failed:model_timeout'],
    ['completed, then expired', [outputs, completed, expired], 'succeeded'],
    ['failed twice', [failed, expired], 'failed:pod_crash'],
    ['requeued, then the agent\'s failure', [draining, failed], 'queued'],
  ])('%s: the first event decides', async (_name, steps, expected) => {
    const { listener, table, outcomes, stored, published } = listen();
    for (const step of steps) step(listener);
    await listener.settled;
    await flush();
    const record = stored();
    expect(record.status === 'failed' ? `failed:${record.errorCode}` : record.status).toBe(expected);
    expect(table.finishes.length + table.requeues).toBe(1);
    expect(outcomes).toHaveLength(1);
    expect(published.filter((update) => update.status !== 'running')).toHaveLength(1);
  });

  test('an output arriving after the completion is not returned inline', async () => {
    const { listener, outcomes } = listen({ record: { outputCount: 1, sync: true, responseFormat: 'b64_json' }, uploads: [] });
    listener.onOutput(Buffer.from('png-0'), 'image/png', '');
    listener.onCompleted();
    listener.onOutput(Buffer.from('late'), 'image/png', '');
    await listener.settled;
    await flush(1);
    expect(outcomes[0].inline.map((data) => data.toString())).toEqual(['png-0']);
  });

  test('outputs and progress after the end change nothing', async () => {
    const { listener, table, published } = listen({ record: { outputCount: 1 }, uploads: uploadsFor(1) });
    listener.onFailed(failure('vram_exceeded'));
    listener.onOutput(Buffer.alloc(0), 'image/png', 'ws/req_1/0.png');
    listener.onProgress(50);
    await listener.settled;
    expect(table.progressWrites).toEqual([]);
    expect(published.map((update) => update.status)).toEqual(['failed']);
  });
});

describe('MediaJobListener progress', () => {
  test.each<[number, number]>([
    [42.7, 42],
    [0, 0],
    [-3, 0],
    [100, 99],
    [250, 99],
  ])('a report of %p %% shows as %p (100 only once succeeded)', (percent, shown) => {
    const { listener, published } = listen();
    listener.onProgress(percent);
    expect(published).toEqual([{ status: 'running', progress: shown }]);
  });

  test('every report is published, but written at most once per interval', async () => {
    const { listener, table, published } = listen();
    listener.onProgress(10);
    now += 200;
    listener.onProgress(20);
    now += 700;
    listener.onProgress(30);
    now += 100;
    listener.onProgress(40);
    now += 999;
    listener.onProgress(50);
    now += 1;
    listener.onProgress(60);
    await flush(1);
    expect(published.map((update) => update.progress)).toEqual([10, 20, 30, 40, 50, 60]);
    expect(table.progressWrites).toEqual([10, 40, 60]);
  });

  test('a failed progress write is a warning, not the job\'s failure', async () => {
    const { listener, table, log } = listen({ record: { outputCount: 1 }, uploads: uploadsFor(1) });
    table.failProgress = true;
    listener.onProgress(30);
    await flush(1);
    expect(log.warnings).toEqual(['could not record progress']);
    listener.onOutput(Buffer.alloc(0), 'image/png', 'ws/req_1/0.png');
    listener.onCompleted();
    expect(await listener.settled).toMatchObject({ status: 'succeeded', progress: 100 });
  });
});
