import type { AuthenticatedKey } from '../api-keys/api-key.service';
import type { Catalog, CatalogModel } from '../catalog/catalog';
import type { JobRouter, RouteHint } from '../cluster/job-router';
import type { Deployment } from '../deployments/deployment.entity';
import type { DeploymentStore } from '../deployments/deployment-store';
import type { CacheSalts } from '../dispatch/cache-salts';
import type { ClientPresence, ColdStartQueue } from '../dispatch/cold-start-queue';
import type { DispatchRequest, Job, JobListener } from '../dispatch/job';
import { AppError } from '../errors/app-error';
import type { RateLimitDecision, RateLimiter, TokenHold } from '../rate-limits/rate-limit-decision';
import { resolveMediaModel } from '../requests/media-model';
import type { MediaOutcome } from '../requests/media-jobs';
import type { MediaSubmission, RequestService } from '../requests/request-service';
import type { RequestRecord } from '../requests/request-record.entity';
import type { PricedModel } from '../sharing/shared-pool';
import { sharedModelName, type SharedServing } from '../sharing/shared-serving';
import { RESTARTING_FOR_SHARING } from '../sharing/sharing-rollout';
import type { UsageInput } from '../usage/usage-recorder';
import type { JobKind } from '../../proto/worker/v1';
import { refuseToolsWithoutParser } from './tool-support';
import { checkModelField, checkTextModel, clampCompletion, creditRefusal, pausedRefusal, refusePaused, refuseWithoutCredit, textTokenHold } from './admission';
import { completionBound, withCompletionBound } from './completion-bound';
import type { FanOutSink, JobSink, RunSummary } from './job-sink';
import { WorkTicket, type Settlement, type TicketOwner, type TicketParts } from './work-ticket';
import type { FinishedRequest, RequestObserver } from './finished-request';
import type { AdapterAddressing, AddressedAdapter } from './adapter-addressing';
import { ContentCapture } from './request-content';
import { GPU_HOURS, RequestSpans, type CostBasis } from './request-spans';
import { isSampled, type SpanContext, type Tracing } from '../../common/tracing/tracing';

/** `responses`: a Responses API turn, translated to chat before it gets here (control-plane/responses). */
export type TextEndpoint = 'chat.completions' | 'completions' | 'responses';

/** What the pipeline needs of a chat or completions body the gateway parsed and validated. */
export interface TextWork {
  readonly endpoint: TextEndpoint;
  /** The client's bytes, passed to the engine untouched (a guest's may get a `max_tokens` bound). */
  readonly body: Buffer;
  readonly fields: Record<string, unknown>;
  readonly model: string | undefined;
  readonly stream: boolean;
  readonly includeUsage: boolean;
  /** When the job must be done by (the gateway's request timeout). */
  readonly deadlineUnixMs: number;
  /** Streamed jobs: chunk bytes the agent may send ahead of the client (`Assign.stream_window_bytes`). */
  readonly streamWindowBytes: number;
  /**
   * The "this deployment serves …" text for a model that does not answer `endpoint`; the OpenAI
   * request model knows the endpoints (servedEndpoints, control-plane/openai/inference-endpoints.ts,
   * which builds on this folder and so is passed in, not imported).
   */
  readonly servedBy: (model: CatalogModel) => string;
  /** The gateway's request id and the request's trace, carried to its FinishedRequest. */
  readonly trace?: RequestTrace;
}

/** Which HTTP request and trace a piece of work belongs to. */
export interface RequestTrace {
  readonly requestId?: string;
  readonly traceId?: string;
  /**
   * The span the pipeline's spans are children of (the gateway's HTTP span, a stored
   * submission's, a batch line's), when tracing is on; absent, the request is not traced.
   */
  readonly parent?: SpanContext;
}

/** An embeddings body the gateway parsed against the model's limits. */
export interface EmbeddingWork {
  readonly model: string | undefined;
  /** The request's size in bytes: no input has more tokens than bytes, so it bounds the TPD hold. */
  readonly bodyBytes: number;
  /** The client's body, kept in the request log where its workspace stores bodies. */
  readonly body?: Buffer;
  readonly deadlineUnixMs: number;
  readonly trace?: RequestTrace;
}

/** Where the pipeline records what it measured; telemetry's Metrics is one (tokens and the rest per request: the observer). */
export interface PipelineMetrics {
  recordTimeToFirstToken(endpoint: TextEndpoint, seconds: number): void;
}

export interface PipelineParts {
  readonly catalog: Pick<Catalog, 'find'>;
  readonly deployments: Pick<DeploymentStore, 'findBySlug'>;
  readonly rateLimiter: Pick<RateLimiter, 'admit' | 'settle' | 'refusalNow' | 'resize'>;
  /** Owner jobs: a ready replica here or on a peer server. */
  readonly jobs: Pick<JobRouter, 'dispatch'>;
  readonly shared: Pick<SharedServing, 'resolve' | 'defaultMaxTokens' | 'refusalNow' | 'admit' | 'dispatch' | 'finish' | 'firstToken' | 'adapterRef'>;
  readonly requests: Pick<RequestService, 'submit' | 'run'>;
  readonly usage: { record(input: UsageInput): void };
  readonly metrics: PipelineMetrics;
  /** Hears every settled request (metrics per deployment, rollups, the request log). */
  readonly observer?: RequestObserver;
  /** Each text job carries its caller's salt: prefix caches never cross workspaces. */
  readonly cacheSalts: Pick<CacheSalts, 'of'>;
  /** The request log's cap on each stored body (a workspace that stores bodies: `AuthenticatedKey.storesBodies`). @default 32768 */
  readonly contentMaxBytes?: number;
  /** This server's tracing; null or absent when off (then no request makes a span). */
  readonly tracing?: Tracing | null;
  /** `model` naming a LoRA adapter of the caller's workspace (adapters/); absent: every `model` is a base model. */
  readonly adapters?: AdapterAddressing;
  /** Owner requests that find no ready replica wait here while one starts (scale to zero); absent: the 503 at once. */
  readonly coldStarts?: Pick<ColdStartQueue, 'wait' | 'noReplica'>;
  /** Hears each owner request admitted, once (the autoscaler's arrival rate and idle time, the minute rollups); guests and batch lines are not arrivals. */
  readonly arrivals?: ArrivalObserver;
  readonly now?: () => number;
}

/** Told of every owner request the pipeline admits (text, embeddings, media): what the autoscaler counts as arrivals. */
export interface ArrivalObserver {
  arrived(deployment: Deployment): void;
}

/** Who a batch line's usage record belongs to. */
export interface BatchLineOwner {
  readonly workspaceId: string;
  readonly apiKeyId: string;
  readonly deploymentId: string;
  readonly batchId: string;
  /** As live requests name theirs (`chat.completions`, `embeddings`, …). */
  readonly endpoint: string;
  /** The catalog model id of the batch's deployment. */
  readonly model: string;
  /** The LoRA adapter the line's `model` named (docs/adapters.md#addressing); absent for the base model. */
  readonly adapter?: FinishedRequest['adapter'];
}

/** What a request that ended before its job was sent reports: nothing ran. */
const NOTHING_RAN: RunSummary = { usage: undefined, firstByteMs: 0 };

/** A batch line's ticket answers no HTTP request: no rate-limit headers to give. */
const NO_RATE_LIMIT = { remainingRequests: 0, resetRequestsSeconds: 0, remainingTokens: 0, resetTokensSeconds: 0 };
/** A line whose key is gone holds no tokens, and has none to settle. */
const NO_HOLD = { apiKeyId: '', day: 0, tokens: 0, shared: false } as unknown as TokenHold;
const NO_TOKEN_BUDGET: Settlement['rateLimiter'] = { settle: () => {} };
const NO_OBSERVER: RequestObserver = { requestFinished: () => {} };

const TEXT_JOB_KINDS: Record<TextEndpoint, JobKind> = { 'chat.completions': 'JOB_KIND_CHAT_COMPLETION', completions: 'JOB_KIND_COMPLETION', responses: 'JOB_KIND_CHAT_COMPLETION' };

/**
 * The one path every kind of work takes, in this order: resolve the target (a deployment or a
 * shared model) → admission (model and modality, credit, a paused deployment, RPM and the TPD
 * hold, a guest's pool slot and credit) → placement and dispatch (owners through the job
 * router, guests through the shared pool, media through the durable queue) → metering and
 * settlement (the WorkTicket). A gateway route reads its body, calls this, renders the answer;
 * it decides no rule of its own, so no endpoint can forget one.
 */
export class InferencePipeline {
  private readonly settlement: Settlement;
  private readonly now: () => number;
  private readonly tracing: Tracing | null;
  private readonly contentMaxBytes: number;

  constructor(private readonly parts: PipelineParts) {
    this.now = parts.now ?? Date.now;
    this.tracing = parts.tracing ?? null;
    this.contentMaxBytes = parts.contentMaxBytes ?? 32_768;
    this.settlement = { rateLimiter: parts.rateLimiter, usage: parts.usage, observer: parts.observer ?? NO_OBSERVER, now: this.now };
  }

  /**
   * `/d/<slug>/v1` → the key's deployment; another workspace's answers 404 like a missing one,
   * so endpoints cannot be probed. With `spends`, what the key and deployment alone refuse
   * (`refusalBeforeBody`) is thrown too, so a text route resolves and screens in one call.
   */
  async deployment(key: AuthenticatedKey, slug: string, spends?: 'text'): Promise<Deployment> {
    const deployment = await this.parts.deployments.findBySlug(slug);
    if (!deployment || deployment.workspaceId !== key.workspaceId) {
      throw new AppError('deployment_not_found', `no deployment endpoint at /d/${slug}/v1 for this API key`);
    }
    const refusal = spends ? this.refusalBeforeBody(key, deployment, spends) : null;
    if (refusal) throw refusal;
    return deployment;
  }

  /**
   * What refuses a request on its key and deployment alone, decided before its body is read (in
   * memory, synchronously): no credit (402), a paused deployment (503; a guest names none), and for text work a key
   * whose minute or day is already used up (429). A zero-credit key held 4 MiB per slow body
   * before it was told 402; now nothing of the body is read. Admission decides again, exactly.
   */
  refusalBeforeBody(key: AuthenticatedKey, deployment: Deployment | null, work: 'text' | 'media'): AppError | null {
    return creditRefusal(key) ?? (deployment ? pausedRefusal(deployment, work) : null) ?? (work === 'text' ? this.parts.rateLimiter.refusalNow(key) : null);
  }

  /**
   * A chat or completions request on its owner's deployment, run to its end: admitted, placed
   * and dispatched, carried to its client by `sink`, settled from its job's terminal event (or
   * its holds given back when it never ran). The gateway's one call for the request's work.
   */
  async runText(key: AuthenticatedKey, deployment: Deployment, work: TextWork, sink: JobSink): Promise<RunSummary> {
    return await this.run(await this.admitText(key, deployment, work), sink);
  }

  /** A guest's chat request for `shared/<model-id>` run to its end, as `runText` (admission: `admitShared`). */
  async runShared(key: AuthenticatedKey, work: TextWork, labelled: (label: string) => void, screened: PricedModel | undefined, sink: JobSink): Promise<RunSummary> {
    return await this.run(await this.admitShared(key, work, labelled, screened), sink);
  }

  /**
   * An embeddings request run to its end: admitted, its engine batches sent by `sink` through
   * the ticket (each metered from its terminal event), settled once when the answer is written
   * and every batch has ended, with their summed usage.
   */
  async runEmbeddings(key: AuthenticatedKey, deployment: Deployment, model: CatalogModel & { embedding: NonNullable<CatalogModel['embedding']> }, work: EmbeddingWork, sink: FanOutSink): Promise<RunSummary> {
    const ticket = await this.admitEmbeddings(key, deployment, model, work);
    try {
      sink.admitted(ticket.rateLimit);
      const waiting = ticket.waitForReplica(sink);
      if (waiting !== null && (await waiting) === null) return NOTHING_RAN;
      await sink.carry(ticket);
      return { usage: ticket.endedUsage, firstByteMs: 0 };
    } finally {
      ticket.close();
    }
  }

  /**
   * An admitted request's one job, from dispatch to close: sent with `sink` as its listener
   * (metered by the ticket first), after waiting for a first replica where none is ready yet
   * (the cold-start queue; a client that leaves meanwhile ends it, nothing sent), carried by the
   * sink, its first byte's latency recorded, and the ticket closed on every path (a request that
   * never ran gives its holds back).
   */
  async run(ticket: WorkTicket, sink: JobSink): Promise<RunSummary> {
    try {
      sink.admitted(ticket.rateLimit);
      const waiting = ticket.waitForReplica(sink);
      if (waiting !== null && (await waiting) === null) return NOTHING_RAN;
      const firstByteMs = await sink.carry(ticket.dispatch(sink));
      if (firstByteMs > 0) ticket.firstToken(firstByteMs);
      return { usage: ticket.endedUsage, firstByteMs };
    } finally {
      ticket.close();
    }
  }

  /** A chat or completions request on its owner's deployment, admitted (a Responses turn runs it with `run`). */
  async admitText(key: AuthenticatedKey, deployment: Deployment, work: TextWork): Promise<WorkTicket> {
    const startedAt = this.now();
    try {
      const entry = this.parts.catalog.find(deployment.modelId);
      // Only a `model` other than the base's can name an adapter: the base model's requests never wait on the lookup.
      const adapter = this.mayNameAdapter(deployment, work) ? await this.adapterOf(key, deployment, work) : null;
      checkTextModel(deployment, adapter ? undefined : work.model, work.endpoint, entry, work.servedBy);
      refuseToolsWithoutParser(entry, work.fields);
      refuseWithoutCredit(key);
      refusePaused(deployment, 'text');
      const content = this.capture(key, work.body);
      const { decision, work: admitted } = await this.admitTokens(key, work);
      work = admitted;
      this.parts.arrivals?.arrived(deployment);
      const base = this.textJob(work, deployment.id, deployment.modelId, key.workspaceId);
      // An adapter job's `model` is the client's name for it: the agent sends the engine
      // `adapter.name` and renames the engine's answer back to the job's model, so the answer
      // carries what the client asked for (docs/adapters.md#addressing).
      const job = adapter ? { ...base, model: adapter.adapter.name, adapter: adapter.ref } : base;
      const owner: TicketOwner = {
        workspaceId: key.workspaceId, apiKeyId: key.id, deploymentId: deployment.id, sharedModel: null, endpoint: work.endpoint, stream: work.stream, recordsReplica: true,
        model: deployment.modelId, requestId: work.trace?.requestId, traceId: work.trace?.traceId, content, ...(adapter ? { adapter: adapter.adapter } : {}),
      };
      const route = { policy: deployment.routingPolicy, fields: work.fields, tenant: key.workspaceId };
      return new WorkTicket(decision, owner, {
        send: (listener, _body, traceparent) => this.sendOwned(deployment, traceparent ? { ...job, traceparent } : job, listener, route),
        waitForReplica: (client) => this.waitForReplica(deployment, job, client),
        firstToken: (ms) => this.parts.metrics.recordTimeToFirstToken(work.endpoint, ms / 1000),
      }, this.settlement, startedAt, 'terminal', this.spansOf(work.trace, owner, GPU_HOURS, startedAt));
    } catch (error) {
      this.refused(work.trace, startedAt, error);
      throw error;
    }
  }

  /**
   * The refusals of a guest's request that need neither its parsed body nor the database, in
   * this order: the model (400, 404), the pool (503 without providers; 429 without an idle
   * guest slot, or past the guest's fair share while others wait), the credit (402: none left,
   * or too little for the worst case). All in memory; the gateway calls this with what a scan
   * of the raw body found (`model`, `max_tokens`, `max_completion_tokens`, `n`), before parsing
   * it, so a refused attempt costs no parse and no round trip. Returns the model (for
   * `admitShared`) and the refusal, if any: a refusal is returned, not thrown (a flood is mostly
   * refusals; a throw cost more than the screen). A bad model (400, 404) is thrown.
   */
  screenShared(key: AuthenticatedKey, scanned: { model: unknown; fields: Record<string, unknown>; bodyBytes: number }, labelled: (label: string) => void): { model: PricedModel; refusal: AppError | null } {
    const { shared } = this.parts;
    const model = shared.resolve(scanned.model);
    labelled(sharedModelName(model));
    // The credit's "no credit left" is refuseWithoutCredit's rule for every endpoint, checked after the pool.
    const maxCompletionTokens = completionBound(scanned.fields, shared.defaultMaxTokens).total;
    return { model, refusal: shared.refusalNow(key, model, maxCompletionTokens, scanned.bodyBytes) };
  }

  /**
   * A guest's chat request for `shared/<model-id>`, admitted: a replica of some owner who
   * shares the model has an idle guest slot the guest's fair share allows, and the guest's
   * credit holds the worst-case cost. `labelled` learns the shared model as soon as it is known
   * (the metrics and log label). `screened`: the model `screenShared` passed for this request
   * (its screen is not repeated when the parsed body names the same model). A body without a
   * completion bound gets the guest's default first, so the TPD hold, its clamp and the credit
   * hold all count the bound the engine keeps to.
   */
  async admitShared(key: AuthenticatedKey, work: TextWork, labelled: (label: string) => void, screened?: PricedModel): Promise<WorkTicket> {
    const startedAt = this.now();
    try {
      const { shared, rateLimiter } = this.parts;
      const model = screened && work.model === sharedModelName(screened) ? screened : this.screened(key, work, labelled);
      // `labelled` heard the label from screenShared (here, or the gateway's call before the parse).
      const label = sharedModelName(model);
      const content = this.capture(key, work.body);
      refuseToolsWithoutParser(this.parts.catalog.find(model.modelId), work.fields);
      work = { ...work, ...withCompletionBound(work.fields, work.body, shared.defaultMaxTokens) };
      const tokens = await this.admitTokens(key, work);
      const decision = tokens.decision;
      work = tokens.work;
      let admission;
      let adapterRef;
      try {
        // An owner's shared adapter (docs/adapters.md#sharing): the job carries its ref, named `shared/<id>` to the engine's answer.
        adapterRef = model.adapter ? await shared.adapterRef(model, work.deadlineUnixMs) : null;
        admission = await shared.admit(key, model, completionBound(work.fields).total, work.body);
      } catch (error) {
        rateLimiter.settle(decision.hold, 0);
        throw error;
      }
      const guest = admission;
      // The guest's own salt, never the owner's: it reuses only prefixes its own workspace left.
      const textJob = this.textJob(work, guest.deploymentId, model.modelId, key.workspaceId);
      const job = adapterRef ? { ...textJob, adapter: adapterRef } : textJob;
      // The guest's own record (TPD, the guest's usage) names the owner's deployment that served it (a real deployment id,
      // which the guest's usage answers never show), the shared model it called and the adapter, if any; never the replica.
      const owner: TicketOwner = {
        workspaceId: key.workspaceId, apiKeyId: key.id, deploymentId: guest.deploymentId, sharedModel: label, endpoint: work.endpoint, stream: work.stream,
        recordsReplica: false, model: model.modelId, requestId: work.trace?.requestId, traceId: work.trace?.traceId, content,
        ...(model.adapter ? { adapter: { id: model.adapter.id, name: label, revision: model.adapter.revision } } : {}),
      };
      return new WorkTicket(decision, owner, {
        send: (listener, _body, traceparent) => shared.dispatch(guest, traceparent ? { ...job, traceparent } : job, listener),
        finish: (outcome, usage) => void shared.finish(guest, outcome, usage),
        firstToken: (ms) => shared.firstToken(guest, ms),
      }, this.settlement, startedAt, 'terminal', this.spansOf(work.trace, owner, { basis: 'per_token', prices: model.prices }, startedAt));
    } catch (error) {
      this.refused(work.trace, startedAt, error);
      throw error;
    }
  }

  /** The LoRA adapter the request's `model` names on this deployment, or null (a name it does not serve); asked only when `mayNameAdapter`. */
  private async adapterOf(key: AuthenticatedKey, deployment: Deployment, work: TextWork): Promise<AddressedAdapter | null> {
    return await this.parts.adapters!.onDeployment(key.workspaceId, deployment, work.model!, work.deadlineUnixMs);
  }

  /** Adapters are on and `model` is set and not the base model's: the only requests that can name one. */
  private mayNameAdapter(deployment: Deployment, work: TextWork): boolean {
    return this.parts.adapters !== undefined && work.model !== undefined && work.model !== deployment.modelId;
  }

  /** RPM and the TPD hold; a hold past what is left of the day lowers the request's completion bound (admission.ts clampCompletion). */
  private async admitTokens(key: AuthenticatedKey, work: TextWork): Promise<{ decision: RateLimitDecision; work: TextWork }> {
    const { rateLimiter } = this.parts;
    const decision = await rateLimiter.admit(key, textTokenHold(work.body.length, work.fields));
    // The prompt's part of the hold is its bytes, far above its tokens: only the completion is lowered, to what the day has left.
    const completionOver = (decision.overLimitTokens ?? 0) - work.body.length;
    const clamped = completionOver > 0 ? clampCompletion(work.fields, completionOver) : null;
    if (!clamped) return { decision, work };
    const hold = rateLimiter.resize(decision.hold, decision.hold.tokens - clamped.freedTokens);
    return { decision: { ...decision, hold }, work: { ...work, fields: clamped.fields, body: clamped.body } };
  }

  /** A capture of the request's bodies where its workspace stores them (the request log); undefined, and nothing kept, elsewhere. */
  private capture(key: AuthenticatedKey, body: Buffer): ContentCapture | undefined {
    return key.storesBodies ? new ContentCapture(body, this.contentMaxBytes) : undefined;
  }

  private screened(key: AuthenticatedKey, work: TextWork, labelled: (label: string) => void): PricedModel {
    const { model, refusal } = this.screenShared(key, { model: work.model, fields: work.fields, bodyBytes: work.body.length }, labelled);
    if (refusal) throw refusal;
    return model;
  }

  /** The deployment's embedding model, or a 400 that says what the deployment serves. */
  embeddingModel(deployment: Deployment, servedBy: (model: CatalogModel) => string): CatalogModel & { embedding: NonNullable<CatalogModel['embedding']> } {
    const model = this.parts.catalog.find(deployment.modelId);
    if (!model) throw new AppError('model_not_found', `model '${deployment.modelId}' of this deployment is no longer in the catalog`);
    if (model.task !== 'embedding' || !model.embedding) {
      throw new AppError('unsupported_endpoint', `'${model.id}' is not an embedding model; this deployment serves ${servedBy(model)} (and GET /v1/models)`);
    }
    return model as CatalogModel & { embedding: NonNullable<CatalogModel['embedding']> };
  }

  /** An embeddings request, admitted; each engine batch is a `dispatch` with its own body, settled once with their summed usage. */
  private async admitEmbeddings(key: AuthenticatedKey, deployment: Deployment, model: CatalogModel & { embedding: NonNullable<CatalogModel['embedding']> }, work: EmbeddingWork): Promise<WorkTicket> {
    const startedAt = this.now();
    try {
      checkModelField(deployment, work.model);
      refuseWithoutCredit(key);
      refusePaused(deployment, 'text');
      const decision = await this.parts.rateLimiter.admit(key, work.bodyBytes);
      this.parts.arrivals?.arrived(deployment);
      const template: Omit<DispatchRequest, 'body'> = {
        deploymentId: deployment.id, kind: 'JOB_KIND_EMBEDDING', stream: false, includeUsage: false, model: deployment.modelId,
        deadlineUnixMs: work.deadlineUnixMs, embedding: { dimensions: model.embedding.dimensions, maxInputTokens: model.embedding.maxInputTokens },
      };
      const owner: TicketOwner = {
        workspaceId: key.workspaceId, apiKeyId: key.id, deploymentId: deployment.id, sharedModel: null, endpoint: 'embeddings', stream: false, recordsReplica: true,
        model: deployment.modelId, requestId: work.trace?.requestId, traceId: work.trace?.traceId,
          content: key.storesBodies && work.body ? new ContentCapture(work.body, this.contentMaxBytes, false) : undefined,
      };
      return new WorkTicket(decision, owner, {
        send: (listener, body, traceparent) => this.sendOwned(deployment, { ...template, body: body!, traceparent }, listener),
        waitForReplica: (client) => this.waitForReplica(deployment, template, client),
      }, this.settlement, startedAt, 'closed', this.spansOf(work.trace, owner, GPU_HOURS, startedAt));
    } catch (error) {
      this.refused(work.trace, startedAt, error);
      throw error;
    }
  }

  /**
   * A batch line's ticket, for the batch runner that placed and runs it (batch-runner.ts): the
   * runner alone knows whether the line is answered or goes back to its queue, so it settles
   * the ticket itself (`settle`, or `release` when the line did not run). `hold`: the line's
   * tokens-per-day hold, null when its key is gone; `send`: the runner's own placement, on the
   * slot it reserved. Its record carries the batch and no replica, and it is never billed per
   * token (batch lines cost the deployment's GPU-hours).
   */
  batchLine(line: BatchLineOwner, hold: TokenHold | null, startedAt: number, send: TicketParts['send'], trace?: RequestTrace): WorkTicket {
    const settlement = hold ? this.settlement : { ...this.settlement, rateLimiter: NO_TOKEN_BUDGET };
    const owner: TicketOwner = {
      workspaceId: line.workspaceId, apiKeyId: line.apiKeyId, deploymentId: line.deploymentId, sharedModel: null,
      endpoint: line.endpoint, stream: false, recordsReplica: false, batchId: line.batchId, model: line.model, traceId: trace?.traceId,
      ...(line.adapter ? { adapter: line.adapter } : {}),
    };
    return new WorkTicket({ ...NO_RATE_LIMIT, hold: hold ?? NO_HOLD }, owner, { send }, settlement, startedAt, 'explicit', this.spansOf(trace, owner, GPU_HOURS, startedAt));
  }

  /**
   * The request's pipeline spans, when tracing is on and it came with a sampled parent span;
   * otherwise null, and nothing is made (an unsampled request's spans would all be unsampled).
   */
  private spansOf(trace: RequestTrace | undefined, owner: TicketOwner, cost: CostBasis, startedAt: number): RequestSpans | null {
    const parent = trace?.parent;
    return this.tracing && parent && isSampled(parent) ? new RequestSpans(this.tracing, parent, owner, cost, startedAt) : null;
  }

  /** A refused admission's `admit` span (with the refusal), when the request is traced. */
  private refused(trace: RequestTrace | undefined, startedAt: number, error: unknown): void {
    const parent = trace?.parent;
    if (this.tracing && parent && isSampled(parent)) RequestSpans.refused(this.tracing, parent, startedAt, error);
  }

  /** The image or video model a media request names, checked against the deployment. */
  mediaModel(deployment: Deployment, requested: string | undefined, modality: 'image' | 'video'): CatalogModel {
    return resolveMediaModel(this.parts.catalog, deployment, requested, modality);
  }

  /**
   * An async image or video request: admitted, queued durably (the scheduler places it),
   * acknowledged. A retry of a submission already accepted (its Idempotency-Key) gets its record
   * back before admission, which could refuse it now.
   */
  async submitMedia(key: AuthenticatedKey, submission: MediaSubmission): Promise<{ record: RequestRecord; created: boolean }> {
    return this.parts.requests.submit(submission, () => this.admitMedia(key, submission.deployment));
  }

  /** A sync image request: admitted, run on the same queue with the caller waiting up to `budgetMs`. */
  async runMedia(key: AuthenticatedKey, submission: MediaSubmission, budgetMs: number, timeoutError: () => AppError): Promise<MediaOutcome> {
    return this.parts.requests.run(submission, budgetMs, timeoutError, () => this.admitMedia(key, submission.deployment));
  }

  /** A media job spends GPU time billed to the workspace: the same credit rule as text (it used to take 202s at 0 credit). */
  private admitMedia(key: AuthenticatedKey, deployment: Deployment): void {
    refuseWithoutCredit(key);
    refusePaused(deployment, 'media');
    this.parts.arrivals?.arrived(deployment);
  }

  /** A chat or completion job for `workspaceId`, the caller (its prefix-cache salt). */
  private textJob(work: TextWork, deploymentId: string, model: string, workspaceId: string): DispatchRequest {
    return {
      deploymentId, kind: TEXT_JOB_KINDS[work.endpoint], body: work.body, stream: work.stream, includeUsage: work.includeUsage, model,
      deadlineUnixMs: work.deadlineUnixMs, streamWindowBytes: work.stream ? work.streamWindowBytes : 0, cacheSalt: this.parts.cacheSalts.of(workspaceId),
    };
  }

  /** An owner's job to a ready replica of its deployment, here or on a peer; a text job routed by the deployment's policy. */
  private sendOwned(deployment: Deployment, job: DispatchRequest, listener: JobListener, route?: RouteHint): Job {
    try {
      return this.parts.jobs.dispatch(job, listener, route);
    } catch (error) {
      if (error instanceof AppError && error.code === 'no_replica_available') this.parts.coldStarts?.noReplica(deployment);
      throw restartingForSharing(deployment, error);
    }
  }

  /**
   * The owner's request waits for a first replica where none is ready (ColdStartQueue.wait);
   * its job's deadline moves back by the wait, so the job still gets the request's whole time.
   */
  private waitForReplica(deployment: Deployment, job: { deadlineUnixMs: number }, client: ClientPresence | null): Promise<number | null> | null {
    const waiting = this.parts.coldStarts?.wait(deployment, client) ?? null;
    if (waiting === null) return null;
    return waiting.then((waitedMs) => {
      if (waitedMs) job.deadlineUnixMs += waitedMs;
      return waitedMs;
    });
  }
}

/** With no replica ready while the rolling restart for sharing runs, the 503 says so. */
function restartingForSharing(deployment: Deployment, error: unknown): unknown {
  if (!(error instanceof AppError) || error.code !== 'no_replica_available' || deployment.sharing !== 'activating') return error;
  return new AppError('no_replica_available', `this deployment is ${RESTARTING_FOR_SHARING}; its replicas restart one at a time, retry in a few seconds`,
    { retryAfterSeconds: 5, cause: error });
}
