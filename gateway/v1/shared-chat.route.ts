import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AppError } from '../../control-plane/api/errors';
import { type AuthenticatedKey, type InferencePort, parseTextRequest, type PricedModel, type RunSummary, servedEndpoints } from '../../control-plane/api/inference';
import { NESTED, topLevelValues } from '../http/json-top-level';
import { readBody } from '../http/read-body';
import { takeBufferedBody } from '../http/buffered-body';
import { authenticate, authenticateNow } from './authenticate';
import type { RequestTrace } from '../http/request-id';
import { HttpTextSink } from './http-text-sink';
import type { TextRouteOptions } from './text-completion.route';
import type { StreamLimits } from './http-text-sink';
import type { RequestGate } from '../http/request-gate';
import { workTraceOf } from '../http/request-span';

/** The metrics and log label of a guest request before its model is known. */
export const SHARED_MODEL_LABEL = 'shared';

/** What screenNow settled before anything waited. */
export interface EarlyAttempt {
  key?: AuthenticatedKey;
  body?: Buffer;
  /** Set when the screen ran (key and body both at hand): the model it passed, or null when the scan could not read the body. */
  screened?: PricedModel | null;
  /** The screen's refusal: answer it, nothing else. */
  refusal?: AppError;
}

/** What the screen reads of a guest's body before parsing it. */
const SCANNED = ['model', 'max_tokens', 'max_completion_tokens', 'n'] as const;

/**
 * `POST /shared/v1/chat/completions` with `model: "shared/<model-id>"` and the guest's own
 * key: the same body, SSE, pass-through fields and rate-limit headers as a deployment's
 * endpoint, on a replica of any owner who shares that model, billed per token.
 *
 * Most guest attempts in a flood are refused (no idle slot, no credit), so a refusal must cost
 * next to nothing: the body is only scanned for its top-level `model`, `max_tokens`,
 * `max_completion_tokens` and `n` (json-top-level.ts), and the pipeline screens the attempt in
 * memory on those (model → pool → fair share → credit) before the body is parsed and
 * validated. A body the scan cannot read is parsed first, so it gets the parse's own 400.
 */
export class SharedChatRoute {
  constructor(
    private readonly apiKeys: InferencePort['apiKeys'], private readonly pipeline: InferencePort['pipeline'], private readonly gate: RequestGate,
    private readonly options: TextRouteOptions & StreamLimits,
  ) {}

  /**
   * As much of the attempt as can be decided without waiting, synchronously: the key when it is
   * cached, the body when it has arrived whole, and then the in-memory screen. Its refusal is
   * returned (a 401 is thrown): a flood's refused attempt then costs no promise, listener, tick
   * or throw.
   */
  screenNow(request: IncomingMessage, labelled: (label: string) => void): EarlyAttempt {
    const key = authenticateNow(this.apiKeys, request.headers.authorization);
    if (!key) return {};
    const body = takeBufferedBody(request, this.options.maxBodyBytes);
    if (!body) return { key };
    const screen = this.screen(key, body, labelled);
    return { key, body, screened: screen?.model ?? null, refusal: screen?.refusal ?? undefined };
  }

  /** Answers on the raw response, going on from `early` (screenNow); `labelled` learns the shared model once it is known (the metrics and log label). */
  async handle(request: IncomingMessage, response: ServerResponse, trace: RequestTrace, labelled: (label: string) => void, early: EarlyAttempt): Promise<RunSummary> {
    const key = early.key ?? await authenticate(this.apiKeys, request.headers.authorization);
    if (early.refusal) throw early.refusal;
    const held = this.gate.enter(request, response, key, null, 'text');
    const body = early.body ?? await readBody(request, this.options.maxBodyBytes, held);
    const screened = early.screened === undefined ? this.screenOrRefuse(key, body, labelled) : early.screened ?? undefined;
    const textRequest = parseTextRequest(body, 'chat.completions');
    return await this.pipeline.runShared(key, {
      endpoint: 'chat.completions', body, fields: textRequest.fields, model: textRequest.model, stream: textRequest.stream,
      includeUsage: textRequest.includeUsage, deadlineUnixMs: Date.now() + this.options.requestTimeoutMs,
      streamWindowBytes: this.options.streamBufferBytes, servedBy: servedEndpoints, trace: workTraceOf(trace.id, trace.span),
    }, labelled, screened, new HttpTextSink(response, textRequest.stream, key, trace, { requestTimeoutMs: this.options.requestTimeoutMs, limits: this.options, memory: held }));
  }

  private screenOrRefuse(key: AuthenticatedKey, body: Buffer, labelled: (label: string) => void): PricedModel | undefined {
    const screen = this.screen(key, body, labelled);
    if (screen?.refusal) throw screen.refusal;
    return screen?.model;
  }

  /** The in-memory screen on the scanned fields (its model and refusal, if any); undefined when the scan could not read the body. */
  private screen(key: AuthenticatedKey, body: Buffer, labelled: (label: string) => void): { model: PricedModel; refusal: AppError | null } | undefined {
    const values = topLevelValues(body, SCANNED);
    if (!values) return undefined;
    const model = values.get('model');
    // Not a string: the parse names the field (400) as it always did.
    if (model !== undefined && typeof model !== 'string') return undefined;
    const fields: Record<string, unknown> = {};
    for (const name of SCANNED) {
      const value = values.get(name);
      if (value !== undefined && value !== NESTED) fields[name] = value;
    }
    return this.pipeline.screenShared(key, { model, fields, bodyBytes: body.length }, labelled);
  }
}
