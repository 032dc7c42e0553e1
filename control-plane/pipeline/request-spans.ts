import { SpanKind, SpanStatusCode, traceparentOf, type Attributes, type Span, type SpanContext, type Tracing } from '../../common/tracing/tracing';
import { ATTR, GEN_AI_OPERATIONS } from '../../common/tracing/span-attributes';
import { setUsage } from '../../common/tracing/job-span';
import { moneyOf, tokenCost, unitPrices } from '../billing/credit-units';
import type { Job } from '../dispatch/job';
import { AppError } from '../errors/app-error';
import type { FinishedRequest } from './finished-request';

/** What a request is, as its spans name it (a WorkTicket's owner has these fields). */
export interface SpannedRequest {
  readonly workspaceId: string;
  readonly deploymentId: string;
  readonly sharedModel: string | null;
  readonly model: string;
  readonly endpoint: string;
  readonly stream: boolean;
  readonly requestId?: string;
  readonly batchId?: string;
  /** The LoRA adapter `model` named; absent or null for the base model. */
  readonly adapter?: FinishedRequest['adapter'];
}

/**
 * How a request is charged, for its span's cost: a guest's request at the shared model's
 * per-token prices; an owner's request (and a batch line) costs no money of its own, the
 * deployment's replicas are billed by the GPU-hour whatever runs on them.
 */
export type CostBasis =
  | { readonly basis: 'gpu_hours' }
  | { readonly basis: 'per_token'; readonly prices: { readonly inputPerMillion: string; readonly outputPerMillion: string } };

export const GPU_HOURS: CostBasis = { basis: 'gpu_hours' };

/**
 * The pipeline's spans of one admitted request, children of the span the request came with
 * (the gateway's HTTP span, or a stored submission's): `admit` (from arrival to the end of
 * admission), then the request's GenAI span (`chat <model>`, from the first dispatch to
 * settlement: model, adapter, usage, finish reason, replica, cost) with its `place` (the routing
 * decision and send) and, when the agent queued the job, `queue wait`. The ticket holds one of
 * these only when tracing is on and the request has a parent; otherwise nothing here is made.
 * Each attribute is said once per trace (the request id and route are the HTTP span's): with
 * every request sampled, each one costs on every request (bench/results/2026-11-29-issue37-tracing.md).
 */
export class RequestSpans {
  private dispatchSpan: Span | null = null;
  private placeSpan: Span | null = null;
  private queueSpan: Span | null = null;

  constructor(
    private readonly tracing: Tracing,
    private readonly parent: SpanContext,
    private readonly request: SpannedRequest,
    private readonly cost: CostBasis,
    /** When the request arrived (Unix ms): its admit span starts there and ends now. */
    startedAt: number,
  ) {
    tracing.startSpan('admit', SpanKind.INTERNAL, parent, undefined, startedAt).end();
  }

  /** A request admission refused (its code on an `admit` span of its own); nothing else of it is traced. */
  static refused(tracing: Tracing, parent: SpanContext, startedAt: number, error: unknown): void {
    const code = error instanceof AppError ? error.code : 'internal_error';
    const span = tracing.startSpan('admit', SpanKind.INTERNAL, parent, { [ATTR.errorType]: code }, startedAt);
    span.setStatus({ code: SpanStatusCode.ERROR, message: error instanceof Error ? error.message : String(error) });
    span.end();
  }

  /** A job is about to be placed: the GenAI span opens (at the first), and a `place` span under it. Returns the Assign's traceparent. */
  dispatching(): string {
    const { request } = this;
    this.dispatchSpan ??= this.tracing.startSpan(`${GEN_AI_OPERATIONS[request.endpoint] ?? request.endpoint} ${request.model}`, SpanKind.CLIENT, this.parent, this.attributes());
    const context = this.dispatchSpan.spanContext();
    this.placeSpan = this.tracing.startSpan('place', SpanKind.INTERNAL, context);
    return traceparentOf(context);
  }

  /** Where the job went: a replica here (and why the policy chose it), or a peer server, which names the replica later. */
  placed(job: Job): void {
    const span = this.placeSpan;
    if (!span) return;
    this.placeSpan = null;
    // A relayed job's replica is known only from its first event: the GenAI span names it then.
    if (job.replicaId) span.setAttribute(ATTR.replicaId, job.replicaId);
    else if (job.carrier.peerId) span.setAttribute('inference.peer.server_id', job.carrier.peerId);
    if (job.routingReason) span.setAttribute(ATTR.routingReason, job.routingReason);
    span.end();
  }

  /** No replica could take the job (a 503 or 429 to come). */
  notPlaced(error: unknown): void {
    const span = this.placeSpan;
    if (!span) return;
    this.placeSpan = null;
    failed(span, error instanceof AppError ? error.code : 'internal_error', error);
  }

  /** The agent queued the job for a slot. */
  queued(): void {
    if (this.dispatchSpan && !this.queueSpan) this.queueSpan = this.tracing.startSpan('queue wait', SpanKind.INTERNAL, this.dispatchSpan.spanContext());
  }

  /** The agent started the job it had queued. */
  started(): void {
    this.queueSpan?.end();
    this.queueSpan = null;
  }

  /** Settled: the GenAI span gets the request's usage, finish reason, replica and cost, and ends. */
  finished(finished: FinishedRequest): void {
    this.started();
    const span = this.dispatchSpan;
    if (!span) return;
    this.dispatchSpan = null;
    setUsage(span, finished);
    if (finished.replicaId) span.setAttribute(ATTR.replicaId, finished.replicaId);
    if (finished.finishReason) span.setAttribute(ATTR.finishReasons, [finished.finishReason]);
    const usd = this.costOf(finished);
    if (usd !== null) span.setAttribute(ATTR.costUsd, usd);
    if (finished.outcome === 'succeeded') {
      span.end();
      return;
    }
    // Failed or canceled (the client left, the deadline passed): an error span, its code as error.type.
    span.setAttribute(ATTR.outcome, finished.outcome);
    failed(span, finished.errorCode ?? finished.outcome, finished.errorCode ?? finished.outcome);
  }

  /** The request ended without a settlement (nothing ran): what is open ends. */
  released(): void {
    this.started();
    this.placeSpan?.end();
    this.placeSpan = null;
    this.dispatchSpan?.end();
    this.dispatchSpan = null;
  }

  /** A guest's charge, as shared serving settles it (nothing for a failed request or one with no tokens); null for GPU-hour requests. */
  private costOf(finished: FinishedRequest): string | null {
    if (this.cost.basis !== 'per_token') return null;
    if (finished.outcome === 'failed' || finished.promptTokens + finished.completionTokens === 0) return '0';
    return moneyOf(tokenCost(finished.promptTokens, finished.completionTokens, unitPrices(this.cost.prices)));
  }

  /** The GenAI span's attributes at its start: what it is, for whom, how it is charged. */
  private attributes(): Attributes {
    const { request } = this;
    const operation = GEN_AI_OPERATIONS[request.endpoint] ?? request.endpoint;
    const attributes: Attributes = {
      [ATTR.operationName]: operation, [ATTR.requestModel]: request.model, [ATTR.workspaceId]: request.workspaceId, [ATTR.deploymentId]: request.deploymentId,
      [ATTR.costBasis]: this.cost.basis,
    };
    // Work that no HTTP request of this trace carries (a background turn run again, a batch line) names its endpoint here.
    if (!request.requestId) attributes[ATTR.endpoint] = request.endpoint;
    if (request.sharedModel) attributes[ATTR.sharedModel] = request.sharedModel;
    if (request.batchId) attributes[ATTR.batchId] = request.batchId;
    if (request.adapter) {
      attributes[ATTR.adapterId] = request.adapter.id;
      attributes[ATTR.adapterName] = request.adapter.name;
      attributes[ATTR.adapterRevision] = request.adapter.revision;
    }
    return attributes;
  }
}

function failed(span: Span, code: string, error: unknown): void {
  span.setAttribute(ATTR.errorType, code);
  span.setStatus({ code: SpanStatusCode.ERROR, message: error instanceof Error ? error.message : String(error) });
  span.end();
}
