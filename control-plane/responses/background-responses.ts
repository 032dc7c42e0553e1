import type { Logger } from 'pino';
import type { AuthenticatedKey } from '../api-keys/api-key.service';
import type { CatalogModel } from '../catalog/catalog';
import type { Deployment } from '../deployments/deployment.entity';
import type { Job } from '../dispatch/job';
import { AppError } from '../errors/app-error';
import type { ClusterNotifier } from '../events/cluster-notifier';
import type { BackgroundEnd, BackgroundQueue } from './background-queue';
import { BackgroundTurnListener, type BackgroundJobEnd } from './background-turn';
import type { ResponseRecord } from './response-record.entity';
import type { ResponseScope } from './response-scope';
import { notFound, objectOf, type ResponsesService, type ResponseTurn } from './responses-service';
import { parentOf } from '../../common/tracing/tracing';

export interface BackgroundOptions {
  /** A running turn's server renews its claim this often… */
  leaseMs: number;
  /** …and this often looks for rows nobody holds (a server that died, a turn put back). */
  sweepIntervalMs: number;
  /** Longest a background response may take from its creation, waits in the queue included. */
  timeoutMs: number;
  /** Runs of one response (a server dying mid-turn costs one); past this it fails. */
  maxAttempts: number;
  /** A turn no replica could take now is tried again after this. */
  retryDelayMs: number;
}

export interface BackgroundParts {
  readonly queue: BackgroundQueue;
  readonly service: Pick<ResponsesService, 'resume' | 'queuedRecord'>;
  /** The creating key as it is now (null once revoked). */
  readonly keys: (apiKeyId: string) => Promise<AuthenticatedKey | null>;
  readonly deployments: (deploymentId: string) => Promise<Deployment | null>;
  readonly notifier: Pick<ClusterNotifier, 'publish' | 'on' | 'onReset' | 'instanceId'>;
  /** "This deployment serves …" (control-plane/openai/inference-endpoints.ts; admission's message for a model that changed task). */
  readonly servedBy: (model: CatalogModel) => string;
  /** The clock in milliseconds turns' deadlines are measured by. @default Date.now */
  readonly now?: () => number;
}

/** Refusals that pass with time (limits, a busy or starting deployment): the turn waits in the queue for them. */
const RETRIABLE = new Set(['rate_limit_error', 'replica_saturated', 'no_replica_available', 'no_pod_available', 'deployment_paused', 'service_unavailable',
  'budget_exceeded', 'server_busy', 'shared_pool_busy']);
/** Job failures in which the replica went away, not the request: run again (bounded by `maxAttempts`). */
const LOST = new Set(['pod_crash', 'agent_draining', 'agent_disconnected']);

/** The agent's send window of a resumed turn's stream (its chunks are credited back as they arrive). */
const STREAM_WINDOW_BYTES = 256 * 1024;

interface Running {
  readonly job: Job;
  /** Why this server cancelled the job, if it did: the row's end follows from it. */
  reason: 'user' | 'shutdown' | 'deadline' | null;
  readonly done: Promise<void>;
}

/**
 * `background: true` responses. The create stores the row `queued` and answers; the turn runs
 * on this server at once through the same pipeline ticket as a synchronous turn (admitted at
 * the create, so its 4xx/429 answer the create), and the row moves to `in_progress`, then
 * `completed`, `incomplete`, `failed` or `cancelled`. The queue is the responses table itself
 * (background-queue.ts), leased like the media jobs' request records: a server renews the
 * leases of what it runs; a row whose server died is taken by any server's sweep and run
 * again from the start, at most `maxAttempts` times; a stopping server cancels its turns and
 * puts them back. Terminal changes write their webhook events in the same transaction.
 */
export class BackgroundResponses {
  private readonly running = new Map<string, Running>();
  /** Rows this server is claiming or admitting (not yet running): the sweep leaves them alone. */
  private readonly starting = new Set<string>();
  /** Cancels that arrived while their turn was being admitted here. */
  private readonly cancelled = new Set<string>();
  private sweepTimer: NodeJS.Timeout | undefined;
  private sweeping: Promise<void> | null = null;
  private stopped = false;

  private readonly now: () => number;

  constructor(private readonly parts: BackgroundParts, readonly options: BackgroundOptions, private readonly logger: Logger) {
    this.now = parts.now ?? Date.now;
  }

  start(): void {
    this.parts.notifier.on('response-cancel', (id) => this.cancelHere(id));
    this.sweepTimer = setInterval(() => void this.sweep(), this.options.sweepIntervalMs);
    this.sweepTimer.unref();
    void this.sweep();
  }

  /**
   * Takes no more turns, cancels this server's running ones and puts them back in the queue
   * (billed for what they generated; another server, or this one restarted, runs them again).
   */
  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    clearInterval(this.sweepTimer);
    await this.sweeping;
    for (const running of this.running.values()) {
      running.reason = 'shutdown';
      running.job.cancel('server_stopping');
    }
    await Promise.all([...this.running.values()].map((running) => running.done));
  }

  /** Stores an admitted turn `queued`, starts it here, and answers its object at once. */
  async create(turn: ResponseTurn): Promise<Record<string, unknown>> {
    const record = this.parts.service.queuedRecord(turn, this.parts.notifier.instanceId, this.options.leaseMs);
    try {
      await this.parts.queue.insert(record);
    } catch (error) {
      turn.ticket.close();
      throw error;
    }
    this.starting.add(record.id);
    void this.run(record.id, turn).finally(() => this.starting.delete(record.id));
    return objectOf(record);
  }

  /**
   * `POST /responses/{id}/cancel`: a queued turn never runs; a running one's engine job is
   * cancelled wherever it runs (billed for what it generated). Cancelling a cancelled response
   * answers it again; a finished one, or one not created in the background, is a 400 (OpenAI's answers).
   */
  async cancel(scope: ResponseScope, id: string): Promise<Record<string, unknown>> {
    const record = await this.parts.queue.find(scope, id);
    if (!record) throw notFound(id);
    if (!record.background) throw new AppError('invalid_request', `response ${id} was not created with background: true; only background responses can be cancelled`, { param: 'response_id' });
    if (record.status === 'cancelled') return objectOf(record);
    const ended = record.status === 'queued' || record.status === 'in_progress'
      ? await this.parts.queue.finish(id, { status: 'cancelled', output: [], usage: null, error: null, incompleteDetails: null })
      : null;
    if (!ended) {
      const now = await this.parts.queue.find(scope, id);
      if (now?.status === 'cancelled') return objectOf(now);
      throw new AppError('invalid_request', `response ${id} is already ${now?.status ?? record.status}; only a queued or in-progress response can be cancelled`, { param: 'response_id' });
    }
    if (!this.cancelHere(id)) this.parts.notifier.publish('response-cancel', id);
    return objectOf(ended);
  }

  /**
   * Before `DELETE /responses/{id}`: a background response still queued or running is cancelled
   * first (its `response.cancelled` event sent, its engine job stopped wherever it runs), so no
   * engine works, and nobody pays, for a response that is gone.
   */
  async beforeDelete(scope: ResponseScope, id: string): Promise<void> {
    const record = await this.parts.queue.find(scope, id);
    if (!record?.background || (record.status !== 'queued' && record.status !== 'in_progress')) return;
    // It may end meanwhile (the cancel then answers 400): deleting it is all that is left to do.
    await this.cancel(scope, id).catch(() => undefined);
  }

  /** Cancels the turn's engine job if it runs here (true), or stops it before it is dispatched here. */
  private cancelHere(id: string): boolean {
    const running = this.running.get(id);
    if (running) {
      running.reason = 'user';
      running.job.cancel('canceled');
      return true;
    }
    if (!this.starting.has(id)) return false;
    this.cancelled.add(id);
    return true;
  }

  /** Claims the row and runs its turn: `admitted` at its create here, else admitted again now. */
  private async run(id: string, admitted?: ResponseTurn): Promise<void> {
    try {
      const record = await this.parts.queue.claim(id, this.parts.notifier.instanceId, this.options.leaseMs, admitted !== undefined);
      if (!record || this.stopped) {
        admitted?.ticket.close();
        if (record) await this.parts.queue.requeue(id, this.parts.notifier.instanceId, 0, true);
        return;
      }
      if (record.attempts > this.options.maxAttempts) {
        admitted?.ticket.close();
        await this.fail(id, 'server_error', `the server running this response stopped before it finished, ${this.options.maxAttempts} times`);
        return;
      }
      if (this.now() >= this.deadlineOf(record)) {
        // Left in the queue past its time (every server was down, say): not started at all.
        admitted?.ticket.close();
        await this.fail(id, 'server_error', this.timedOut());
        return;
      }
      let turn: ResponseTurn;
      try {
        turn = admitted ?? await this.admit(record);
      } catch (error) {
        await this.refused(record, error);
        return;
      }
      await this.dispatch(record, turn);
    } catch (error) {
      admitted?.ticket.close();
      this.logger.error({ err: error, responseId: id }, 'a background response could not be run; the sweep takes it again once its lease lapses');
    } finally {
      this.cancelled.delete(id);
    }
  }

  private async admit(record: ResponseRecord): Promise<ResponseTurn> {
    const key = await this.parts.keys(record.apiKeyId);
    if (!key || key.workspaceId !== record.workspaceId) throw new AppError('invalid_api_key', 'the API key that created this response was revoked');
    const deployment = await this.parts.deployments(record.deploymentId);
    if (!deployment || deployment.workspaceId !== record.workspaceId) throw new AppError('deployment_not_found', 'the deployment of this response no longer exists');
    // Run again (here, or on another server): the create request's trace goes on, its pipeline spans under the create's span.
    const parent = parentOf(record.traceparent);
    return await this.parts.service.resume(key, deployment, record, {
      deadlineUnixMs: this.deadlineOf(record), streamWindowBytes: STREAM_WINDOW_BYTES, servedBy: this.parts.servedBy,
      trace: parent ? { traceId: parent.traceId, parent } : undefined,
    });
  }

  private deadlineOf(record: Pick<ResponseRecord, 'createdAt'>): number {
    return record.createdAt.getTime() + this.options.timeoutMs;
  }

  /** Admission or placement refused the turn: it waits for a passing refusal (until its deadline), else fails with it. */
  private async refused(record: ResponseRecord, error: unknown): Promise<void> {
    const appError = error instanceof AppError ? error : new AppError('internal_error', 'the response could not be started', { cause: error });
    if (RETRIABLE.has(appError.code) && this.now() + this.options.retryDelayMs < this.deadlineOf(record)) {
      await this.parts.queue.requeue(record.id, this.parts.notifier.instanceId, this.options.retryDelayMs, true);
      // Looked at again when due, not at the next sweep (any server's sweep may take it first).
      setTimeout(() => void this.sweep(), this.options.retryDelayMs + 10).unref();
      return;
    }
    const code = appError.code === 'rate_limit_error' || appError.code === 'budget_exceeded' ? 'rate_limit_exceeded'
      : appError.code === 'invalid_request' || appError.code === 'model_mismatch' || appError.code === 'unsupported_endpoint' ? 'invalid_prompt' : 'server_error';
    await this.fail(record.id, code, appError.message);
  }

  private async dispatch(record: ResponseRecord, turn: ResponseTurn): Promise<void> {
    if (this.cancelled.has(record.id)) {
      turn.ticket.close();
      return;
    }
    const listener = new BackgroundTurnListener(turn);
    let job: Job;
    try {
      job = turn.ticket.dispatch(listener);
    } catch (error) {
      turn.ticket.close();
      await this.refused(record, error);
      return;
    }
    listener.attach(job);
    let finished!: () => void;
    const running: Running = { job, reason: null, done: new Promise((resolve) => (finished = resolve)) };
    this.running.set(record.id, running);
    const timer = setTimeout(() => {
      running.reason = 'deadline';
      job.cancel('deadline');
    }, Math.max(0, this.deadlineOf(record) - this.now()));
    try {
      const end = await listener.ended;
      clearTimeout(timer);
      await this.recordEnd(record, running, end);
    } catch (error) {
      this.logger.error({ err: error, responseId: record.id }, 'the end of a background response could not be recorded');
    } finally {
      this.running.delete(record.id);
      finished();
    }
  }

  private async recordEnd(record: ResponseRecord, running: Running, end: BackgroundJobEnd): Promise<void> {
    const { queue, notifier } = this.parts;
    if (end.kind === 'completed') {
      const ended = await queue.finish(record.id, { ...end.result, error: null }, ['in_progress']);
      if (!ended) await queue.recordCancelled(record.id, { output: end.result.output, usage: end.result.usage });
      return;
    }
    if (running.reason === 'user') {
      await queue.recordCancelled(record.id, { output: end.output, usage: end.usage });
      return;
    }
    if (running.reason === 'shutdown' || (LOST.has(end.failure.code) && record.attempts < this.options.maxAttempts)) {
      // Run again from the start: by another server now, or by this one once restarted.
      if (await queue.requeue(record.id, notifier.instanceId, running.reason === 'shutdown' ? 0 : this.options.retryDelayMs, false)) return;
      await queue.recordCancelled(record.id, { output: [], usage: end.usage });
      return;
    }
    const message = running.reason === 'deadline' ? this.timedOut() : end.failure.message || end.failure.code;
    const ended = await queue.finish(record.id, failed('server_error', message, end.usage), ['in_progress']);
    if (!ended) await queue.recordCancelled(record.id, { output: [], usage: end.usage });
  }

  private timedOut(): string {
    return `the response did not finish within ${Math.round(this.options.timeoutMs / 1000)} s of its creation (RESPONSES_BACKGROUND_TIMEOUT_MS)`;
  }

  private async fail(id: string, code: string, message: string): Promise<void> {
    await this.parts.queue.finish(id, failed(code, message, null));
  }

  /** The safety net: renew this server's leases, and run rows nobody holds (their server died, or they were put back). */
  private sweep(): Promise<void> {
    if (this.sweeping || this.stopped) return this.sweeping ?? Promise.resolve();
    this.sweeping = (async () => {
      try {
        const { queue, notifier } = this.parts;
        await queue.renewLeases(notifier.instanceId, [...this.running.keys()], this.options.leaseMs);
        for (const id of await queue.unheld(20)) {
          if (this.stopped || this.starting.has(id) || this.running.has(id)) continue;
          this.starting.add(id);
          void this.run(id).finally(() => this.starting.delete(id));
        }
      } catch (error) {
        this.logger.error({ err: error }, 'background responses sweep failed');
      } finally {
        this.sweeping = null;
      }
    })();
    return this.sweeping;
  }
}

function failed(code: string, message: string, usage: BackgroundEnd['usage']): BackgroundEnd {
  return { status: 'failed', output: [], usage, error: { code, message }, incompleteDetails: null };
}
