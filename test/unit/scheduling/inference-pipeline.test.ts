/**
 * InferencePipeline over recording fakes: the order of the admission rules (model field,
 * modality, endpoint, credit, a paused deployment, then the TPD hold), the job each kind of work
 * sends, where a guest's request goes, and that a media request is admitted by the same credit
 * and pause rules. The ticket's own settlement rules are in work-ticket.test.ts.
 */
import type { AuthenticatedKey } from '../../../control-plane/api-keys/api-key.service';
import type { CatalogModel } from '../../../control-plane/catalog/catalog';
import type { Deployment } from '../../../control-plane/deployments/deployment.entity';
import type { DispatchRequest, Job, JobFailure, JobListener } from '../../../control-plane/dispatch/job';
import type { FinishedRequest } from '../../../control-plane/pipeline/finished-request';
import type { FanOutSink, JobDispatch, JobSink } from '../../../control-plane/pipeline/job-sink';
import type { Usage } from '../../../proto/worker/v1';
import { AppError } from '../../../control-plane/errors/app-error';
import { textTokenHold } from '../../../control-plane/pipeline/admission';
import { DEFAULT_COMPLETION_HOLD } from '../../../control-plane/pipeline/completion-bound';
import { InferencePipeline, type PipelineParts, type TextWork } from '../../../control-plane/pipeline/inference-pipeline';
import type { RateLimitDecision, TokenHold } from '../../../control-plane/rate-limits/rate-limit-decision';
import type { MediaOutcome } from '../../../control-plane/requests/media-jobs';
import type { MediaSubmission } from '../../../control-plane/requests/request-service';
import type { RequestRecord } from '../../../control-plane/requests/request-record.entity';
import type { GuestAdmission } from '../../../control-plane/sharing/shared-serving';
import { RESTARTING_FOR_SHARING } from '../../../control-plane/sharing/sharing-rollout';
import type { UsageInput } from '../../../control-plane/usage/usage-recorder';
import { RecordingListener, rejectedWith, thrownCode } from './fakes';
import { chatModel, deployment, SHARED_MODEL } from './sharing-fixtures';

const KEY: AuthenticatedKey = { id: 'key_1', workspaceId: 'ws_owner', rpmLimit: 60, tpdLimit: 1_000_000, creditExhausted: false };
const BROKE: AuthenticatedKey = { ...KEY, creditExhausted: true };
const EMBEDDER = chatModel({ id: 'acme/embed-1', task: 'embedding', embedding: { dimensions: 768, maxInputTokens: 512, maxBatchInputs: 32 } as CatalogModel['embedding'] });
const BASE = chatModel({ id: 'acme/base-1', task: 'completion' });
const PAINTER = chatModel({ id: 'acme/paint-1', modality: 'image', task: 'image-generation' });
const PAINTER_2 = chatModel({ id: 'acme/paint-2', modality: 'image', task: 'image-generation' });
const SERVED_BY = 'POST /v1/serves-this-only';
const OWNED = deployment({ id: 'dep_owner', slug: 'owned', workspaceId: 'ws_owner', modelId: SHARED_MODEL, sharing: 'not_shared' });

function world() {
  const log: string[] = [];
  let clock = 1_000;
  let holds = 0;
  const rate = {
    admits: [] as Array<{ key: string; holdTokens: number | undefined }>,
    issued: [] as TokenHold[],
    settles: [] as Array<{ hold: TokenHold; used: number }>,
    async admit(key: AuthenticatedKey, holdTokens?: number): Promise<RateLimitDecision> {
      log.push('rate.admit');
      rate.admits.push({ key: key.id, holdTokens });
      const hold = { apiKeyId: key.id, day: 20_000, tokens: holdTokens ?? 0, shared: false, marker: `hold_${++holds}` } as TokenHold;
      rate.issued.push(hold);
      return { remainingRequests: 59, resetRequestsSeconds: 60, remainingTokens: 900, resetTokensSeconds: 3_600, hold };
    },
    settle(hold: TokenHold, used: number) {
      rate.settles.push({ hold, used });
    },
    refusal: null as AppError | null,
    refusalNow: () => rate.refusal,
  };
  const job = { id: 'job_1', replicaId: 'rep_1', finished: false, cancel() {}, consumed() {} } as unknown as Job;
  const jobs = {
    sent: [] as Array<{ request: DispatchRequest; listener: JobListener; hint?: unknown }>,
    failWith: null as AppError | null,
    dispatch(request: DispatchRequest, listener: JobListener, hint?: unknown): Job {
      if (jobs.failWith) throw jobs.failWith;
      jobs.sent.push({ request, listener, hint });
      return job;
    },
  };
  const admission = { id: 'shr_1', deploymentId: 'dep_provider', ownerWorkspaceId: 'ws_provider' } as GuestAdmission;
  const shared = {
    calls: [] as unknown[][],
    admitError: null as AppError | null,
    defaultMaxTokens: 64,
    resolve(id: unknown) {
      log.push('shared.resolve');
      if (id !== `shared/${SHARED_MODEL}`) throw new AppError('model_not_found', 'no such shared model');
      return { modelId: SHARED_MODEL, prices: { inputPerMillion: '0.1', outputPerMillion: '0.4' } };
    },
    poolError: null as AppError | null,
    creditError: null as AppError | null,
    refusalNow(key: AuthenticatedKey, model: { modelId: string }, maxCompletionTokens: number, bodyBytes: number) {
      log.push('shared.refusalNow');
      shared.calls.push(['refusalNow', key.id, model.modelId, maxCompletionTokens, bodyBytes]);
      // As SharedServing does: the pool, then a workspace without credit, then the worst case (test/unit/scheduling/shared-serving.test.ts checks the real one).
      if (shared.poolError) return shared.poolError;
      if (key.creditExhausted) return new AppError('insufficient_quota', 'the workspace has no credit left; add credit to continue');
      return shared.creditError;
    },
    async admit(key: AuthenticatedKey, model: { modelId: string }, maxCompletionTokens: number, body: Buffer) {
      log.push('shared.admit');
      shared.calls.push(['admit', key.id, model.modelId, maxCompletionTokens, body]);
      if (shared.admitError) throw shared.admitError;
      return admission;
    },
    dispatch(guest: GuestAdmission, request: unknown, listener: JobListener) {
      shared.calls.push(['dispatch', guest, request, listener]);
      return job;
    },
    async finish(guest: GuestAdmission, outcome: string, usage: unknown) {
      shared.calls.push(['finish', guest, outcome, usage]);
    },
    firstToken(guest: GuestAdmission, ms: number) {
      shared.calls.push(['firstToken', guest, ms]);
    },
  };
  const requests = {
    calls: 0,
    queued: [] as MediaSubmission[],
    runs: [] as Array<{ submission: MediaSubmission; budgetMs: number; timeoutError: () => AppError }>,
    record: { id: 'req_1' } as RequestRecord,
    outcome: { kind: 'done' } as unknown as MediaOutcome,
    async submit(submission: MediaSubmission, admit: () => void = () => {}) {
      requests.calls++;
      admit();
      requests.queued.push(submission);
      return { record: requests.record, created: true };
    },
    async run(submission: MediaSubmission, budgetMs: number, timeoutError: () => AppError, admit: () => void = () => {}) {
      requests.calls++;
      admit();
      requests.runs.push({ submission, budgetMs, timeoutError });
      return requests.outcome;
    },
  };
  const usage = { records: [] as UsageInput[], record: (input: UsageInput) => void usage.records.push(input) };
  const metrics = {
    /** What the metrics observer counts of each settled request: its label (a guest's is the shared model), prompt and completion tokens. */
    tokens: [] as unknown[][],
    ttft: [] as unknown[][],
    recordTimeToFirstToken: (endpoint: string, seconds: number) => void metrics.ttft.push([endpoint, seconds]),
  };
  const observer = {
    requestFinished: (request: FinishedRequest) => void metrics.tokens.push([request.sharedModel ?? request.deploymentId, request.promptTokens, request.completionTokens]),
  };
  const models = [chatModel(), EMBEDDER, BASE, PAINTER, PAINTER_2];
  const slugs: Deployment[] = [OWNED, deployment({ id: 'dep_other', slug: 'theirs', workspaceId: 'ws_other' })];
  const parts = {
    catalog: { find: (id: string) => models.find((model) => model.id === id) },
    deployments: { findBySlug: async (slug: string) => slugs.find((candidate) => candidate.slug === slug) ?? null },
    rateLimiter: rate, jobs, shared, requests, usage, metrics, observer, now: () => clock,
    cacheSalts: { of: (workspaceId: string) => `salt-of-${workspaceId}` },
  };
  const pipeline = new InferencePipeline(parts as unknown as PipelineParts);
  return { pipeline, log, rate, jobs, job, shared, admission, requests, usage, metrics, advance: (ms: number) => (clock += ms) };
}

/** A 30-byte chat body asking for 2 choices of at most 500 tokens. */
function text(overrides: Partial<TextWork> = {}): TextWork {
  return {
    endpoint: 'chat.completions', body: Buffer.alloc(30, 'x'), fields: { max_tokens: 500, n: 2 }, model: undefined, stream: false,
    includeUsage: true, deadlineUnixMs: 9_000_000, streamWindowBytes: 65_536, servedBy: () => SERVED_BY, ...overrides,
  };
}

describe('InferencePipeline text admission', () => {
  // Every case also has every later rule failing, so the first rule that refuses is the one asserted.
  test.each<[string, Partial<Deployment>, Partial<TextWork>, string, Record<string, unknown>]>([
    ['a model field naming another model', { modelId: 'acme/paint-1' }, { model: 'acme/other' }, 'model_mismatch', { param: 'model' }],
    ['an image model', { modelId: 'acme/paint-1' }, {}, 'wrong_modality', { param: 'model' }],
    ['an embedding model', { modelId: 'acme/embed-1' }, {}, 'unsupported_endpoint', {}],
    ['chat on a base completion model', { modelId: 'acme/base-1' }, {}, 'unsupported_endpoint', { param: 'messages' }],
    ['a key without credit', {}, {}, 'insufficient_quota', {}],
  ])('%s is refused first, before the rate limiter', async (_name, overrides, work, code, extra) => {
    const { pipeline, rate } = world();
    const error = await rejectedWith(pipeline.admitText(BROKE, deployment({ ...overrides, status: 'Paused' }), text(work)));
    expect(error).toMatchObject({ code, ...extra });
    if (overrides.modelId === 'acme/embed-1') expect(error.message).toContain(SERVED_BY);
    expect(rate.admits).toEqual([]);
  });

  test('a paused deployment answers deployment_paused with Retry-After 60, before the rate limiter', async () => {
    const { pipeline, rate } = world();
    const error = await rejectedWith(pipeline.admitText(KEY, deployment({ status: 'Paused' }), text()));
    expect(error).toMatchObject({ code: 'deployment_paused', retryAfterSeconds: 60 });
    expect(rate.admits).toEqual([]);
  });

  test('completions on a base model and a model field naming the deployment\'s own model pass to the TPD hold', async () => {
    const { pipeline, rate } = world();
    await pipeline.admitText(KEY, deployment({ modelId: 'acme/base-1' }), text({ endpoint: 'completions', model: 'acme/base-1' }));
    const ticket = await pipeline.admitText(KEY, OWNED, text({ model: SHARED_MODEL }));
    expect(rate.admits).toEqual([{ key: 'key_1', holdTokens: 30 + 1000 }, { key: 'key_1', holdTokens: 30 + 1000 }]);
    expect(ticket.rateLimit.hold).toBe(rate.issued[1]);
    expect(ticket.label).toBe('dep_owner');
  });
});

describe('InferencePipeline owner ticket', () => {
  test.each<[TextWork['endpoint'], boolean, string, number]>([
    ['chat.completions', true, 'JOB_KIND_CHAT_COMPLETION', 65_536],
    ['completions', false, 'JOB_KIND_COMPLETION', 0],
  ])('%s (stream %s) sends the body untouched as %s with window %d', async (endpoint, stream, kind, window) => {
    const { pipeline, jobs, job } = world();
    const work = text({ endpoint, stream });
    const ticket = await pipeline.admitText(KEY, OWNED, work);
    const listener = new RecordingListener();
    expect(ticket.dispatch(listener)).toBe(job);
    expect(jobs.sent).toHaveLength(1);
    jobs.sent[0].listener.onChunk(Buffer.from('tok'));
    expect(listener.chunks).toEqual([Buffer.from('tok')]);
    expect(jobs.sent[0].request).toEqual({
      deploymentId: 'dep_owner', kind, body: work.body, stream, includeUsage: true, model: SHARED_MODEL, deadlineUnixMs: 9_000_000, streamWindowBytes: window,
      cacheSalt: 'salt-of-ws_owner',
    });
    expect(jobs.sent[0].request.body).toBe(work.body);
    // Routed by the owner's own prompt key: its workspace is the tenant.
    expect(jobs.sent[0].hint).toEqual({ policy: OWNED.routingPolicy, fields: work.fields, tenant: 'ws_owner' });
  });

  test('the job\'s terminal event settles the hold to the usage, records it under the deployment with the replica and the clock\'s latency, once', async () => {
    const { pipeline, rate, usage, metrics, advance, jobs } = world();
    const ticket = await pipeline.admitText(KEY, OWNED, text({ stream: true }));
    ticket.dispatch(new RecordingListener());
    advance(250);
    jobs.sent[0].listener.onCompleted({ promptTokens: 12, completionTokens: 30, totalTokens: 42 }, 'stop');
    jobs.sent[0].listener.onFailed({ code: 'canceled', message: 'late', usage: { promptTokens: 1, completionTokens: 1, totalTokens: 2 } } as JobFailure);
    ticket.close();
    expect(rate.settles).toEqual([{ hold: rate.issued[0], used: 42 }]);
    expect(rate.settles[0].hold).toBe(rate.issued[0]);
    expect(usage.records).toEqual([{
      workspaceId: 'ws_owner', apiKeyId: 'key_1', deploymentId: 'dep_owner', sharedModel: null, replicaId: 'rep_1', endpoint: 'chat.completions', status: 'succeeded',
      stream: true, promptTokens: 12, completionTokens: 30, totalTokens: 42, latencyMs: 250, createdAt: new Date(1_000),
    }]);
    expect(metrics.tokens).toEqual([['dep_owner', 12, 30]]);
  });

  test('close without a dispatch releases the hold once and writes no record; the first token is a TTFT metric in seconds', async () => {
    const { pipeline, rate, usage, metrics } = world();
    const ticket = await pipeline.admitText(KEY, OWNED, text());
    ticket.firstToken(1_500);
    ticket.close();
    ticket.close();
    expect(rate.settles).toEqual([{ hold: rate.issued[0], used: 0 }]);
    expect(usage.records).toEqual([]);
    expect(metrics.ttft).toEqual([['chat.completions', 1.5]]);
  });

  test('a dispatch that cannot be placed leaves the hold to close, which releases it', async () => {
    const { pipeline, rate, jobs, usage } = world();
    jobs.failWith = new AppError('no_replica_available', 'no replica is ready', { retryAfterSeconds: 1 });
    const ticket = await pipeline.admitText(KEY, OWNED, text());
    expect(thrownCode(() => ticket.dispatch(new RecordingListener()))).toBe('no_replica_available');
    expect(rate.settles).toEqual([]);
    ticket.close();
    expect(rate.settles).toEqual([{ hold: rate.issued[0], used: 0 }]);
    expect(usage.records).toEqual([]);
  });

  test('no replica while the deployment restarts for sharing is a 503 that says so; otherwise the error passes unchanged', async () => {
    const { pipeline, jobs } = world();
    const original = new AppError('no_replica_available', 'no replica is ready', { retryAfterSeconds: 1 });
    jobs.failWith = original;
    const activating = await pipeline.admitText(KEY, deployment({ sharing: 'activating' }), text());
    let rewritten: unknown;
    try {
      activating.dispatch(new RecordingListener());
    } catch (error) {
      rewritten = error;
    }
    expect(rewritten).toBeInstanceOf(AppError);
    expect(rewritten).not.toBe(original);
    expect(rewritten).toMatchObject({ code: 'no_replica_available', retryAfterSeconds: 5, cause: original });
    expect((rewritten as AppError).message).toContain(RESTARTING_FOR_SHARING);
    for (const sharing of ['shared', 'not_shared'] as const) {
      const ticket = await pipeline.admitText(KEY, deployment({ sharing }), text());
      expect(() => ticket.dispatch(new RecordingListener())).toThrow(original);
    }
    jobs.failWith = new AppError('upstream_error', 'other');
    const other = await pipeline.admitText(KEY, deployment({ sharing: 'activating' }), text());
    expect(() => other.dispatch(new RecordingListener())).toThrow(jobs.failWith);
  });
});

describe('InferencePipeline shared (guest) requests', () => {
  const guestWork = () => text({ model: `shared/${SHARED_MODEL}`, fields: { max_tokens: 100 } });

  test('labels the request, screens it (pool and credit, in memory), then holds TPD, then takes a pool slot; dispatch goes to the shared pool, not the job router', async () => {
    const { pipeline, log, rate, shared, admission, jobs, job } = world();
    const work = guestWork();
    const ticket = await pipeline.admitShared(KEY, work, (label) => log.push(`labelled:${label}`));
    expect(log).toEqual(['shared.resolve', `labelled:shared/${SHARED_MODEL}`, 'shared.refusalNow', 'rate.admit', 'shared.admit']);
    expect(rate.admits).toEqual([{ key: 'key_1', holdTokens: 130 }]);
    const admits = shared.calls.filter((call) => call[0] !== 'refusalNow');
    // The worst case of the body: max_tokens 100 of one choice, and its bytes as the prompt.
    expect(shared.calls[0]).toEqual(['refusalNow', 'key_1', SHARED_MODEL, 100, work.body.length]);
    expect(admits[0]).toEqual(['admit', 'key_1', SHARED_MODEL, 100, work.body]);
    const listener = new RecordingListener();
    expect(ticket.dispatch(listener)).toBe(job);
    expect(jobs.sent).toEqual([]);
    expect(shared.calls[2][1]).toBe(admission);
    expect(shared.calls[2][2]).toMatchObject({ deploymentId: 'dep_provider', kind: 'JOB_KIND_CHAT_COMPLETION', model: SHARED_MODEL, stream: false });
    (shared.calls[2][3] as JobListener).onChunk(Buffer.from('tok'));
    expect(listener.chunks).toEqual([Buffer.from('tok')]);
    ticket.firstToken(700);
    expect(shared.calls[3]).toEqual(['firstToken', admission, 700]);
  });

  test('a guest\'s job carries the guest workspace\'s salt, never the owner\'s', async () => {
    const { pipeline, shared } = world();
    const guest: AuthenticatedKey = { ...KEY, id: 'key_guest', workspaceId: 'ws_guest' };
    const ticket = await pipeline.admitShared(guest, guestWork(), () => {});
    ticket.dispatch(new RecordingListener());
    const dispatched = shared.calls.find((call) => call[0] === 'dispatch')!;
    expect(dispatched[2]).toMatchObject({ cacheSalt: 'salt-of-ws_guest' });
  });

  test('a key without credit is refused by the screen, with no rate-limit admit and no pool slot', async () => {
    const { pipeline, log, rate, shared } = world();
    const error = await rejectedWith(pipeline.admitShared(BROKE, guestWork(), (label) => log.push(`labelled:${label}`)));
    expect(error.code).toBe('insufficient_quota');
    expect(log).toEqual(['shared.resolve', `labelled:shared/${SHARED_MODEL}`, 'shared.refusalNow']);
    expect(rate.admits).toEqual([]);
    expect(shared.calls.map((call) => call[0])).toEqual(['refusalNow']);
  });

  test('screenShared, on what a scan of the raw body found: the model (a bad one thrown), then the refusal returned, with no rate limiter', () => {
    const { pipeline, log, rate, shared } = world();
    shared.poolError = new AppError('shared_pool_busy', 'busy', { retryAfterSeconds: 1 });
    const busy = pipeline.screenShared(KEY, { model: `shared/${SHARED_MODEL}`, fields: { max_tokens: 9 }, bodyBytes: 77 }, (label) => log.push(`labelled:${label}`));
    expect(busy.refusal).toBe(shared.poolError);
    expect(busy.model.modelId).toBe(SHARED_MODEL);
    expect(log).toEqual(['shared.resolve', `labelled:shared/${SHARED_MODEL}`, 'shared.refusalNow']);
    shared.poolError = null;
    shared.creditError = new AppError('insufficient_quota', 'no credit');
    expect(pipeline.screenShared(KEY, { model: `shared/${SHARED_MODEL}`, fields: { max_tokens: 9 }, bodyBytes: 77 }, () => {}).refusal?.code).toBe('insufficient_quota');
    expect(shared.calls.at(-1)).toEqual(['refusalNow', 'key_1', SHARED_MODEL, 9, 77]);
    shared.creditError = null;
    // Without a bound the screen counts the guest default (the body gets it at admission), times n.
    expect(pipeline.screenShared(KEY, { model: `shared/${SHARED_MODEL}`, fields: { n: 2 }, bodyBytes: 2 }, () => {}).refusal).toBeNull();
    expect(shared.calls.at(-1)).toEqual(['refusalNow', 'key_1', SHARED_MODEL, 128, 2]);
    expect(thrownCode(() => pipeline.screenShared(KEY, { model: 'shared/acme/none', fields: {}, bodyBytes: 2 }, () => {}))).toBe('model_not_found');
    expect(rate.admits).toEqual([]);
  });

  test('admitShared after a screen of the same model does not screen again; a parsed model that differs is screened', async () => {
    const { pipeline, log, shared } = world();
    const screened = pipeline.screenShared(KEY, { model: `shared/${SHARED_MODEL}`, fields: {}, bodyBytes: 30 }, () => {}).model;
    log.length = 0;
    await pipeline.admitShared(KEY, guestWork(), () => {}, screened);
    expect(log).toEqual(['rate.admit', 'shared.admit']);
    log.length = 0;
    await pipeline.admitShared(KEY, guestWork(), () => {}, { ...screened, modelId: 'acme/other' });
    expect(log).toEqual(['shared.resolve', 'shared.refusalNow', 'rate.admit', 'shared.admit']);
    expect(shared.calls.filter((call) => call[0] === 'admit')).toHaveLength(2);
  });

  test('a busy pool releases the TPD hold and its error propagates', async () => {
    const { pipeline, rate, shared } = world();
    shared.admitError = new AppError('shared_pool_busy', 'busy', { retryAfterSeconds: 3 });
    await expect(pipeline.admitShared(KEY, guestWork(), () => {})).rejects.toBe(shared.admitError);
    expect(rate.settles).toEqual([{ hold: rate.issued[0], used: 0 }]);
  });

  test('the terminal event records the owner\'s deployment and the shared model with no replica, then bills the guest; close without dispatch releases both holds', async () => {
    const { pipeline, rate, shared, admission, usage, metrics } = world();
    const ticket = await pipeline.admitShared(KEY, guestWork(), () => {});
    ticket.dispatch(new RecordingListener());
    const used = { promptTokens: 5, completionTokens: 20, totalTokens: 25 };
    (shared.calls.find((call) => call[0] === 'dispatch')![3] as JobListener).onCompleted(used, 'stop');
    // deployment_id is the deployment that served it (the guest's usage answers show the shared model instead).
    expect(usage.records).toMatchObject([{ deploymentId: 'dep_provider', sharedModel: `shared/${SHARED_MODEL}`, replicaId: null, totalTokens: 25, status: 'succeeded' }]);
    expect(ticket.label).toBe(`shared/${SHARED_MODEL}`);
    expect(rate.settles).toEqual([{ hold: rate.issued[0], used: 25 }]);
    expect(metrics.tokens).toEqual([[`shared/${SHARED_MODEL}`, 5, 20]]);
    expect(shared.calls.filter((call) => call[0] === 'finish')).toEqual([['finish', admission, 'succeeded', used]]);

    const unsent = await pipeline.admitShared(KEY, guestWork(), () => {});
    unsent.close();
    expect(shared.calls.filter((call) => call[0] === 'finish').slice(1)).toEqual([['finish', admission, 'failed', undefined]]);
    expect(rate.settles[1]).toEqual({ hold: rate.issued[1], used: 0 });
    expect(usage.records).toHaveLength(1);
  });
});

describe('InferencePipeline embeddings', () => {
  const work = { model: undefined, bodyBytes: 4_096, deadlineUnixMs: 9_000_000 };
  const embedding = () => deployment({ id: 'dep_embed', modelId: 'acme/embed-1' });

  test('embeddingModel refuses a chat model naming what it serves, and a model gone from the catalog', () => {
    const { pipeline } = world();
    expect(pipeline.embeddingModel(embedding(), () => SERVED_BY)).toBe(EMBEDDER);
    let caught: unknown;
    try {
      pipeline.embeddingModel(OWNED, () => SERVED_BY);
    } catch (error) {
      caught = error;
    }
    expect(caught).toMatchObject({ code: 'unsupported_endpoint' });
    expect((caught as Error).message).toContain(SERVED_BY);
    expect(thrownCode(() => pipeline.embeddingModel(deployment({ modelId: 'acme/gone' }), () => SERVED_BY))).toBe('model_not_found');
  });

  test.each<[string, AuthenticatedKey, Partial<Deployment>, string | undefined, string]>([
    ['a model field naming another model', BROKE, { status: 'Paused' }, 'acme/other', 'model_mismatch'],
    ['a key without credit', BROKE, { status: 'Paused' }, undefined, 'insufficient_quota'],
    ['a paused deployment', KEY, { status: 'Paused' }, undefined, 'deployment_paused'],
  ])('%s is refused before the rate limiter, and the sink hears nothing', async (_name, key, overrides, model, code) => {
    const { pipeline, rate } = world();
    const sink = fanOutSink([]);
    const error = await rejectedWith(pipeline.runEmbeddings(key, deployment({ modelId: 'acme/embed-1', ...overrides }), EMBEDDER as never, { ...work, model }, sink));
    expect(error.code).toBe(code);
    expect(rate.admits).toEqual([]);
    expect(sink.log).toEqual([]);
  });

  test('holds the body bytes; each batch the sink sends is an embedding job with its own body; settled once, when the answer is written and every batch ended, with their summed usage', async () => {
    const { pipeline, rate, jobs, usage } = world();
    const batches = [Buffer.from('{"input":["a"]}'), Buffer.from('{"input":["b"]}')];
    const sink = fanOutSink(batches, () => {
      expect(rate.admits).toEqual([{ key: 'key_1', holdTokens: 4_096 }]);
      jobs.sent[0].listener.onCompleted({ promptTokens: 4, completionTokens: 0, totalTokens: 4 }, 'stop');
      jobs.sent[1].listener.onCompleted({ promptTokens: 5, completionTokens: 0, totalTokens: 5 }, 'stop');
      expect(usage.records).toEqual([]);
    });
    await pipeline.runEmbeddings(KEY, embedding(), EMBEDDER as never, { ...work, model: 'acme/embed-1' }, sink);
    expect(sink.log).toEqual(['admitted', 'carry']);
    expect(jobs.sent.map((sent) => sent.request)).toEqual(batches.map((body) => ({
      deploymentId: 'dep_embed', kind: 'JOB_KIND_EMBEDDING', body, stream: false, includeUsage: false, model: 'acme/embed-1',
      deadlineUnixMs: 9_000_000, embedding: { dimensions: 768, maxInputTokens: 512 },
    })));
    expect(usage.records).toMatchObject([{ deploymentId: 'dep_embed', endpoint: 'embeddings', replicaId: 'rep_1', totalTokens: 9, stream: false, status: 'succeeded' }]);
    expect(rate.settles).toEqual([{ hold: rate.issued[0], used: 9 }]);
  });

  test('a sink that fails before sending a batch (a bad input) gives the hold back whole, with no record', async () => {
    const { pipeline, rate, usage } = world();
    const sink: FanOutSink = { admitted: () => {}, carry: async () => { throw new AppError('invalid_request', 'input: bad'); } };
    expect((await rejectedWith(pipeline.runEmbeddings(KEY, embedding(), EMBEDDER as never, work, sink))).code).toBe('invalid_request');
    expect(rate.settles).toEqual([{ hold: rate.issued[0], used: 0 }]);
    expect(usage.records).toEqual([]);
  });
});

/** A fan-out sink that sends `bodies` as jobs, then runs `then` (the jobs' ends), recording what it was told. */
function fanOutSink(bodies: Buffer[], then: () => void = () => {}): FanOutSink & { log: string[] } {
  const log: string[] = [];
  return {
    log,
    admitted: () => void log.push('admitted'),
    carry: async (jobs: JobDispatch) => {
      log.push('carry');
      for (const body of bodies) jobs.dispatch(new RecordingListener(), body);
      then();
    },
  };
}

/** A sink that records what the pipeline told it and resolves its carry with `firstByteMs` (or rejects with `error`). */
function recordingSink(options: { firstByteMs?: number; error?: AppError; onCarry?: (job: Job) => void } = {}): JobSink & { log: string[]; rateLimit?: RateLimitDecision; listener: RecordingListener } {
  const listener = new RecordingListener();
  const sink = {
    log: [] as string[],
    rateLimit: undefined as RateLimitDecision | undefined,
    listener,
    admitted(rateLimit: RateLimitDecision) {
      sink.log.push('admitted');
      sink.rateLimit = rateLimit;
    },
    async carry(job: Job) {
      sink.log.push('carry');
      options.onCarry?.(job);
      if (options.error) throw options.error;
      return options.firstByteMs ?? 0;
    },
    onChunk: (data: Buffer) => listener.onChunk(data),
    onOutput: () => listener.onOutput(),
    onCompleted: (usage: Usage | undefined, reason: string) => listener.onCompleted(usage, reason),
    onFailed: (failure: JobFailure) => listener.onFailed(failure),
  };
  return sink;
}

describe('InferencePipeline.run: a request from admission to close', () => {
  test('runText admits, tells the sink the rate limits, sends the job with the sink as its listener, records the first byte as TTFT, and settles at the terminal event', async () => {
    const { pipeline, rate, jobs, job, usage, metrics } = world();
    const sink = recordingSink({
      firstByteMs: 1_200,
      onCarry: (carried) => {
        expect(carried).toBe(job);
        jobs.sent[0].listener.onChunk(Buffer.from('tok'));
        jobs.sent[0].listener.onCompleted({ promptTokens: 3, completionTokens: 4, totalTokens: 7 }, 'stop');
      },
    });
    await pipeline.runText(KEY, OWNED, text({ stream: true }), sink);
    expect(sink.log).toEqual(['admitted', 'carry']);
    expect(sink.rateLimit?.hold).toBe(rate.issued[0]);
    expect(sink.listener.calls).toEqual(['chunk', 'completed']);
    expect(usage.records).toMatchObject([{ status: 'succeeded', totalTokens: 7, replicaId: 'rep_1' }]);
    expect(rate.settles).toEqual([{ hold: rate.issued[0], used: 7 }]);
    expect(metrics.ttft).toEqual([['chat.completions', 1.2]]);
  });

  test('a refusal at admission never reaches the sink', async () => {
    const { pipeline } = world();
    const sink = recordingSink();
    expect((await rejectedWith(pipeline.runText(BROKE, OWNED, text(), sink))).code).toBe('insufficient_quota');
    expect(sink.log).toEqual([]);
  });

  test('no replica: the error is thrown after the sink was told the rate limits, and the hold goes back whole', async () => {
    const { pipeline, rate, jobs, usage } = world();
    jobs.failWith = new AppError('no_replica_available', 'no replica is ready', { retryAfterSeconds: 1 });
    const sink = recordingSink();
    expect((await rejectedWith(pipeline.runText(KEY, OWNED, text(), sink))).code).toBe('no_replica_available');
    expect(sink.log).toEqual(['admitted']);
    expect(rate.settles).toEqual([{ hold: rate.issued[0], used: 0 }]);
    expect(usage.records).toEqual([]);
  });

  test('a client that left: carry ends first, the canceled job\'s terminal event settles later for what it made; no TTFT without a first byte', async () => {
    const { pipeline, rate, jobs, usage, metrics } = world();
    await pipeline.runText(KEY, OWNED, text({ stream: true }), recordingSink());
    expect(usage.records).toEqual([]);
    expect(rate.settles).toEqual([]);
    jobs.sent[0].listener.onFailed({ code: 'canceled', message: 'client_disconnected', usage: { promptTokens: 3, completionTokens: 2, totalTokens: 5 } } as JobFailure);
    expect(usage.records).toMatchObject([{ status: 'canceled', totalTokens: 5 }]);
    expect(rate.settles).toEqual([{ hold: rate.issued[0], used: 5 }]);
    expect(metrics.ttft).toEqual([]);
  });

  test('runShared runs a guest\'s request through the shared pool, billed at its terminal event', async () => {
    const { pipeline, shared, admission, usage } = world();
    const sink = recordingSink({ onCarry: () => (shared.calls.find((call) => call[0] === 'dispatch')![3] as JobListener).onCompleted({ promptTokens: 1, completionTokens: 2, totalTokens: 3 }, 'stop') });
    await pipeline.runShared(KEY, text({ model: `shared/${SHARED_MODEL}`, fields: { max_tokens: 100 } }), () => {}, undefined, sink);
    expect(usage.records).toMatchObject([{ sharedModel: `shared/${SHARED_MODEL}`, totalTokens: 3 }]);
    expect(shared.calls.filter((call) => call[0] === 'finish')).toEqual([['finish', admission, 'succeeded', { promptTokens: 1, completionTokens: 2, totalTokens: 3 }]]);
  });
});

describe('InferencePipeline batch lines', () => {
  test('a batch line\'s ticket sends through the runner\'s own placement and is settled by the runner: its record carries the batch and no replica', async () => {
    const { pipeline, rate, usage } = world();
    const hold = { apiKeyId: 'key_1', day: 20_000, tokens: 600, shared: false } as TokenHold;
    const sent: Buffer[] = [];
    const ticket = pipeline.batchLine({ workspaceId: 'ws_owner', apiKeyId: 'key_1', deploymentId: 'dep_owner', batchId: 'batch_1', endpoint: 'chat.completions' }, hold, 1_000,
      (_listener, body) => { sent.push(body!); return { id: 'job_9', replicaId: 'rep_9' } as Job; });
    ticket.dispatch(new RecordingListener(), Buffer.from('line'));
    expect(sent).toEqual([Buffer.from('line')]);
    ticket.settle('succeeded', { promptTokens: 2, completionTokens: 3, totalTokens: 5 }, null);
    expect(usage.records).toMatchObject([{ batchId: 'batch_1', replicaId: null, endpoint: 'chat.completions', stream: false, totalTokens: 5 }]);
    expect(rate.settles).toEqual([{ hold, used: 5 }]);
  });

  test('a line whose key is gone has no hold to settle, and still leaves its record', () => {
    const { pipeline, rate, usage } = world();
    const ticket = pipeline.batchLine({ workspaceId: 'ws_owner', apiKeyId: 'key_gone', deploymentId: 'dep_owner', batchId: 'batch_1', endpoint: 'embeddings' }, null, 1_000, () => ({}) as Job);
    ticket.settle('succeeded', { promptTokens: 2, completionTokens: 0, totalTokens: 2 }, null);
    expect(rate.settles).toEqual([]);
    expect(usage.records).toHaveLength(1);
  });
});

describe('InferencePipeline media', () => {
  const painter = (overrides: Partial<Deployment> = {}) => deployment({ id: 'dep_paint', modelId: 'acme/paint-1', ...overrides });
  const submission = (overrides: Partial<Deployment> = {}) => ({
    workspaceId: 'ws_owner', apiKeyId: 'key_1', deployment: painter(overrides), model: PAINTER, kind: 'image_generation', params: { prompt: 'a cat' },
    outputCount: 1, responseFormat: 'url', delivery: {}, inputs: [],
  }) as unknown as MediaSubmission;
  const timeout = () => new AppError('image_generation_timeout', 'too slow');

  test('mediaModel checks the named model against the deployment', () => {
    const { pipeline } = world();
    expect(pipeline.mediaModel(painter(), 'acme/paint-1', 'image')).toBe(PAINTER);
    expect(thrownCode(() => pipeline.mediaModel(painter(), 'acme/paint-2', 'image'))).toBe('model_mismatch');
    expect(thrownCode(() => pipeline.mediaModel(painter(), SHARED_MODEL, 'image'))).toBe('wrong_modality');
  });

  test.each<[string, AuthenticatedKey, Partial<Deployment>, string, number | undefined]>([
    ['a key without credit', BROKE, { status: 'Paused' }, 'insufficient_quota', undefined],
    ['a paused deployment', KEY, { status: 'Paused' }, 'no_pod_available', 60],
  ])('%s is refused by submitMedia and runMedia before anything is queued or run', async (_name, key, overrides, code, retry) => {
    const { pipeline, requests } = world();
    const queued = await rejectedWith(pipeline.submitMedia(key, submission(overrides)));
    const ran = await rejectedWith(pipeline.runMedia(key, submission(overrides), 30_000, timeout));
    for (const error of [queued, ran]) expect(error).toMatchObject({ code, retryAfterSeconds: retry });
    expect(requests.queued).toEqual([]);
    expect(requests.runs).toEqual([]);
  });

  test('an admitted submission passes through to the request service', async () => {
    const { pipeline, requests } = world();
    const queued = submission();
    await expect(pipeline.submitMedia(KEY, queued)).resolves.toEqual({ record: requests.record, created: true });
    expect(requests.queued).toHaveLength(1);
    expect(requests.queued[0]).toBe(queued);
    const ran = submission();
    await expect(pipeline.runMedia(KEY, ran, 30_000, timeout)).resolves.toBe(requests.outcome);
    expect(requests.runs).toHaveLength(1);
    expect(requests.runs[0]).toEqual({ submission: ran, budgetMs: 30_000, timeoutError: timeout });
    expect(requests.runs[0].submission).toBe(ran);
  });
});

describe('InferencePipeline deployment lookup', () => {
  test('another workspace\'s deployment and a missing one are both deployment_not_found', async () => {
    const { pipeline } = world();
    await expect(pipeline.deployment(KEY, 'owned')).resolves.toBe(OWNED);
    expect((await rejectedWith(pipeline.deployment(KEY, 'theirs'))).code).toBe('deployment_not_found');
    expect((await rejectedWith(pipeline.deployment(KEY, 'nowhere'))).code).toBe('deployment_not_found');
  });

  test('a text route resolves and screens in one call: no credit, a paused deployment, a used-up minute are thrown; without `spends` none is', async () => {
    const { pipeline, rate } = world();
    expect((await rejectedWith(pipeline.deployment(BROKE, 'owned', 'text'))).code).toBe('insufficient_quota');
    await expect(pipeline.deployment(BROKE, 'owned')).resolves.toBe(OWNED);
    rate.refusal = new AppError('rate_limit_error', 'the minute is used up', { retryAfterSeconds: 20 });
    await expect(pipeline.deployment(KEY, 'owned', 'text')).rejects.toBe(rate.refusal);
    await expect(pipeline.deployment(KEY, 'owned')).resolves.toBe(OWNED);
    rate.refusal = null;
    OWNED.status = 'Paused';
    try {
      expect((await rejectedWith(pipeline.deployment(KEY, 'owned', 'text'))).code).toBe('deployment_paused');
    } finally {
      OWNED.status = 'Running';
    }
    await expect(pipeline.deployment(KEY, 'owned', 'text')).resolves.toBe(OWNED);
  });
});

describe('textTokenHold', () => {
  test.each<[string, Record<string, unknown>, number]>([
    ['no bound: the default completion hold', {}, 30 + DEFAULT_COMPLETION_HOLD],
    ['max_tokens', { max_tokens: 500 }, 530],
    ['max_completion_tokens over max_tokens', { max_completion_tokens: 100, max_tokens: 500 }, 130],
    ['n multiplies', { max_tokens: 500, n: 2 }, 1_030],
    ['a prompt array of strings multiplies', { max_tokens: 10, prompt: ['a', 'b', 'c'] }, 60],
    ['prompts and n together', { max_tokens: 10, n: 2, prompt: ['a', 'b', 'c'] }, 90],
    ['a single tokenized prompt counts once', { max_tokens: 10, prompt: [1, 2, 3] }, 40],
    ['max_tokens 0 (the parse refuses it): 1', { max_tokens: 0 }, 31],
  ])('%s', (_name, fields, expected) => {
    expect(DEFAULT_COMPLETION_HOLD).toBe(1024);
    expect(textTokenHold(30, fields)).toBe(expected);
  });
});
