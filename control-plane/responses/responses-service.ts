import type { AuthenticatedKey } from '../api-keys/api-key.service';
import type { CatalogModel } from '../catalog/catalog';
import type { Deployment } from '../deployments/deployment.entity';
import { AppError } from '../errors/app-error';
import { shortened } from '../errors/quote-value';
import { itemId as newId } from './response-ids';
import type { InferencePipeline, RequestTrace } from '../pipeline/inference-pipeline';
import { traceparentOf } from '../../common/tracing/tracing';
import type { JobSink, RunSummary } from '../pipeline/job-sink';
import type { WorkTicket } from '../pipeline/work-ticket';
import type { ChatResult } from './chat-to-response';
import { settingsOf, type ResponseItem, type ResponsesRequest } from './response-items';
import { responseObject, type ResponseState } from './response-object';
import { ResponseRecord } from './response-record.entity';
import type { ResponseScope } from './response-scope';
import type { ResponseStore } from './response-store';
import { responsesToChat } from './responses-to-chat';

const DAY_MS = 86_400_000;

/** A response admitted and about to run: its id, the chain it continues, and its pipeline ticket. */
export interface ResponseTurn {
  readonly id: string;
  readonly createdAt: Date;
  readonly request: ResponsesRequest;
  readonly history: ResponseItem[];
  readonly model: string;
  readonly scope: ResponseScope;
  readonly apiKeyId: string;
  readonly ticket: WorkTicket;
  /** The request's trace (its id, and the span its own are children of), kept with a background turn so its runs continue it. */
  readonly trace?: RequestTrace;
}

/** How a turn ended, for its record and its final object. */
export type TurnEnd =
  | ChatResult
  | { status: 'failed' | 'cancelled' | 'incomplete'; output: ResponseItem[]; usage: ChatResult['usage']; error: { code: string; message: string } | null; incompleteDetails: { reason: string } | null };

export interface TurnLimits {
  readonly deadlineUnixMs: number;
  readonly streamWindowBytes: number;
  readonly servedBy: (model: CatalogModel) => string;
  /** The HTTP request's id and span (or a stored background turn's trace): the pipeline's spans are its children. */
  readonly trace?: RequestTrace;
}

/**
 * The Responses API over the one inference pipeline. A turn loads its chain (one scoped lookup
 * by primary key: the previous response holds the whole chain's items), becomes a chat body in
 * one place (responses-to-chat.ts), and is admitted, routed, metered and settled by the
 * pipeline exactly as a chat request (its usage record says `responses`). What it produced is
 * stored when it ends, unless `store` is false.
 */
export class ResponsesService {
  constructor(
    private readonly pipeline: Pick<InferencePipeline, 'admitText' | 'admitShared' | 'run'>,
    private readonly store: ResponseStore,
    private readonly options: { retentionDays: number },
    /** The clock in milliseconds of the records' times and leases. */
    private readonly now: () => number = Date.now,
  ) {}

  async begin(key: AuthenticatedKey, deployment: Deployment, request: ResponsesRequest, limits: TurnLimits): Promise<ResponseTurn> {
    const scope = { workspaceId: key.workspaceId, deploymentId: deployment.id };
    const history = request.previousResponseId ? await this.chainOf(scope, request.previousResponseId) : [];
    return await this.admit(key, deployment, request, history, limits, newId('resp'), new Date(this.now()));
  }

  /**
   * A stored background response admitted again to run (by a server that did not create it, or
   * after its first run was put back): the same request and chain, the same id.
   */
  async resume(key: AuthenticatedKey, deployment: Deployment, record: ResponseRecord, limits: TurnLimits): Promise<ResponseTurn> {
    if (!record.request) throw new AppError('internal_error', `background response ${record.id} has no stored request`);
    return await this.admit(key, deployment, record.request, record.history, limits, record.id, record.createdAt);
  }

  private async admit(
    key: AuthenticatedKey, deployment: Deployment, request: ResponsesRequest, history: ResponseItem[], limits: TurnLimits, id: string, createdAt: Date,
  ): Promise<ResponseTurn> {
    const scope = { workspaceId: key.workspaceId, deploymentId: deployment.id };
    // A background turn streams from the engine (nobody reads it): a cancel then keeps what was
    // generated, and the agent relays its token count, so it is billed for exactly that.
    const stream = request.stream || request.background;
    const chat = responsesToChat({ ...request, stream }, history, deployment.modelId);
    const ticket = await this.pipeline.admitText(key, deployment, {
      endpoint: 'responses', body: Buffer.from(JSON.stringify(chat)), fields: chat, model: request.model, stream, includeUsage: stream,
      deadlineUnixMs: limits.deadlineUnixMs, streamWindowBytes: limits.streamWindowBytes, servedBy: limits.servedBy, trace: limits.trace,
    });
    // A turn addressed to a LoRA adapter answers with the adapter's name, as chat does.
    return { id, createdAt, request, history, model: ticket.adapterName ?? deployment.modelId, scope, apiKeyId: key.id, ticket, trace: limits.trace };
  }

  /**
   * A guest's turn on `/shared/v1` (`model: "shared/<model-id>"`), admitted as a guest's chat:
   * the shared pool, the guest's credit, per-token billing. Its state is the guest workspace's,
   * scoped to the shared model (`deployment_id` holds `shared/<model-id>`), never the owner's.
   */
  async beginShared(key: AuthenticatedKey, request: ResponsesRequest, labelled: (label: string) => void, limits: TurnLimits): Promise<ResponseTurn> {
    const requested = request.model ?? '';
    const history = request.previousResponseId ? await this.chainOf({ workspaceId: key.workspaceId, deploymentId: requested }, request.previousResponseId) : [];
    const chat = responsesToChat(request, history, requested);
    const ticket = await this.pipeline.admitShared(key, {
      endpoint: 'responses', body: Buffer.from(JSON.stringify(chat)), fields: chat, model: request.model, stream: request.stream, includeUsage: request.stream,
      deadlineUnixMs: limits.deadlineUnixMs, streamWindowBytes: limits.streamWindowBytes, servedBy: limits.servedBy, trace: limits.trace,
    }, labelled);
    const scope = { workspaceId: key.workspaceId, deploymentId: ticket.label };
    return { id: newId('resp'), createdAt: new Date(this.now()), request, history, model: ticket.label, scope, apiKeyId: key.id, ticket };
  }

  /** Runs an admitted turn's chat job to its end through the pipeline, carried to its client by `sink`. */
  async run(turn: ResponseTurn, sink: JobSink): Promise<RunSummary> {
    return await this.pipeline.run(turn.ticket, sink);
  }

  /** The object a turn answers while it runs (a stream's `response.created`). */
  running(turn: ResponseTurn): Record<string, unknown> {
    return responseObject(this.state(turn, { status: 'in_progress', output: [], usage: null, error: null, incompleteDetails: null }));
  }

  /**
   * A background turn's row, `queued` (the create answers it at once; the background runner
   * moves it on). Its request is kept whole so any server can run it.
   */
  queuedRecord(turn: ResponseTurn, owner: string, leaseMs: number): ResponseRecord {
    const record = this.record(turn, this.state(turn, { status: 'queued', output: [], usage: null, error: null, incompleteDetails: null }));
    Object.assign(record, {
      completedAt: null, request: turn.request, leaseOwner: owner, leaseExpiresAt: new Date(this.now() + leaseMs), attempts: 0,
      // The create's span: a run on any server, and the webhook of its end, continue its trace.
      traceparent: turn.trace?.parent ? traceparentOf(turn.trace.parent) : null,
    });
    return record;
  }

  /** Stores a turn's end (when `store`) and returns its final object. */
  async end(turn: ResponseTurn, end: TurnEnd): Promise<Record<string, unknown>> {
    const state = this.state(turn, end);
    if (turn.request.store) await this.store.insert(this.record(turn, state));
    return responseObject(state);
  }

  async retrieve(scope: ResponseScope, id: string): Promise<Record<string, unknown>> {
    return responseObject(stateOf(await this.found(scope, id)));
  }

  async delete(scope: ResponseScope, id: string): Promise<Record<string, unknown>> {
    if (!(await this.store.delete(scope, id))) throw notFound(id);
    return { id, object: 'response', deleted: true };
  }

  /** This response's own input items (not its chain's), OpenAI's list shape. */
  async inputItems(scope: ResponseScope, id: string, query: { limit: number; order: 'asc' | 'desc'; after: string | null }): Promise<Record<string, unknown>> {
    const record = await this.found(scope, id);
    let items = query.order === 'asc' ? record.input : [...record.input].reverse();
    if (query.after !== null) {
      const at = items.findIndex((item) => item.id === query.after);
      if (at === -1) throw new AppError('invalid_request', `after: no input item '${shortened(query.after)}' in response ${id}`, { param: 'after' });
      items = items.slice(at + 1);
    }
    const page = items.slice(0, query.limit);
    return { object: 'list', data: page, first_id: page[0]?.id ?? null, last_id: page.at(-1)?.id ?? null, has_more: items.length > page.length };
  }

  /** The items a new turn continues: the previous response's chain, its input and its output. */
  private async chainOf(scope: ResponseScope, previousId: string): Promise<ResponseItem[]> {
    const previous = await this.store.find(scope, previousId);
    if (!previous) {
      throw new AppError('invalid_request', `previous_response_id: no stored response '${shortened(previousId)}' here (responses with store: false, deleted or past retention are not kept)`,
        { param: 'previous_response_id' });
    }
    if (previous.status === 'queued' || previous.status === 'in_progress') {
      throw new AppError('invalid_request', `previous_response_id: response ${previousId} is still ${previous.status}; continue it once it ended`, { param: 'previous_response_id' });
    }
    return [...previous.history, ...previous.input, ...previous.output];
  }

  private async found(scope: ResponseScope, id: string): Promise<ResponseRecord> {
    const record = await this.store.find(scope, id);
    if (!record) throw notFound(id);
    return record;
  }

  private state(turn: ResponseTurn, end: TurnEnd | (Omit<ResponseState, 'id' | 'createdAt' | 'model' | 'previousResponseId' | 'settings'>)): ResponseState {
    return {
      id: turn.id, createdAt: turn.createdAt, status: end.status, model: turn.model, output: end.output, usage: end.usage,
      error: 'error' in end ? end.error : null, incompleteDetails: end.incompleteDetails, previousResponseId: turn.request.previousResponseId,
      settings: settingsOf(turn.request),
    };
  }

  private record(turn: ResponseTurn, state: ResponseState): ResponseRecord {
    const record = new ResponseRecord();
    Object.assign(record, {
      id: turn.id, workspaceId: turn.scope.workspaceId, deploymentId: turn.scope.deploymentId, apiKeyId: turn.apiKeyId, model: turn.model,
      status: state.status, background: turn.request.background, previousResponseId: turn.request.previousResponseId, settings: state.settings,
      history: turn.history, input: turn.request.input, output: state.output, usage: state.usage, error: state.error, incompleteDetails: state.incompleteDetails,
      createdAt: turn.createdAt, completedAt: new Date(this.now()), expiresAt: new Date(turn.createdAt.getTime() + this.options.retentionDays * DAY_MS),
    });
    return record;
  }
}

/** A stored response as the API shows it. */
export function objectOf(record: ResponseRecord): Record<string, unknown> {
  return responseObject(stateOf(record));
}

function stateOf(record: ResponseRecord): ResponseState {
  return {
    id: record.id, createdAt: record.createdAt, status: record.status, model: record.model, output: record.output, usage: record.usage,
    error: record.error, incompleteDetails: record.incompleteDetails, previousResponseId: record.previousResponseId, settings: record.settings,
  };
}

export function notFound(id: string): AppError {
  return new AppError('not_found', `no response '${shortened(id)}' on this deployment for this API key`);
}
