import * as grpc from '@grpc/grpc-js';
import type { Logger } from 'pino';
import { RELAY_TOKEN_HEADER, type RelayEvent, type RelayEvents, type RelayRequest } from '../../proto/cluster/v1';
import { wireUsage, type JobEvent } from '../../proto/worker/v1';
import type { AgentConnection } from '../dispatch/agent-connection';
import { fromRelayJob } from '../dispatch/assign-mapping';
import type { ClientPresence } from '../dispatch/cold-start-queue';
import type { Dispatcher } from '../dispatch/dispatcher';
import type { DispatchRequest, Job, JobListener } from '../dispatch/job';
import { AppError } from '../errors/app-error';
import { hashSecret, sameHash } from '../secrets';
import { parentOf, SpanKind, traceparentOf, type Span, type Tracing } from '../../common/tracing/tracing';
import { ATTR } from '../../common/tracing/span-attributes';
import { endJobSpan } from '../../common/tracing/job-span';

type RelayCall = grpc.ServerDuplexStream<RelayRequest, RelayEvents>;

/**
 * A relayed owner job that found no replica here waits for one where its deployment scales to
 * zero (relayed-replica-wait.ts): the relaying server's view of this server's replicas is up to
 * a heartbeat old, and a request it took just after the last one stopped got a 503 where a
 * request taken here waits for the cold start. What came of it: waited `waitedMs` for a replica,
 * the relaying server's client left first, or no wait applies (the usual answer then).
 */
export type RelayedReplicaWait = (deploymentId: string, client: ClientPresence) => Promise<{ waitedMs: number } | 'left' | 'not_waiting'>;

/**
 * The called side of `cluster.v1.RelayService` (proto/PROTOCOL.md, "Between servers"): a peer
 * keeps one stream here carrying the jobs it sends for deployments whose agents this server
 * holds; each runs on the least loaded of them (guests only in an idle guest slot), never
 * relayed further, and its events go back as the agent sent them, coalesced per tick. An owner
 * job that finds none here may wait for one (RelayedReplicaWait).
 */
export class RelayServer {
  /** Hashed once; each stream's token is hashed and compared in constant time. */
  private tokenHash = '';
  /** Peers' open streams: a stopping server ends them (its gRPC server waits for every call to end). */
  private readonly streams = new Set<RelayedJobs>();

  constructor(
    private readonly dispatcher: Dispatcher,
    private readonly logger: Logger,
    /** A guest slot here on one of the deployment's replicas (the shared pool's rule; one with adapter slots for an adapter's job), or null when none is idle. */
    private readonly placeGuest: (deploymentId: string, needsAdapterSlots: boolean) => AgentConnection | null = () => null,
    /** This server's tracing; null when off (a relayed job's traceparent then goes on to the agent unchanged). */
    private readonly tracing: Tracing | null = null,
    /** Null: a relayed job that finds no replica here fails back at once. */
    private readonly replicaWait: RelayedReplicaWait | null = null,
  ) {}

  setToken(token: string): void {
    this.tokenHash = hashSecret(token);
  }

  readonly handlers = {
    run: (call: RelayCall): void => this.run(call),
  };

  private run(call: RelayCall): void {
    const presented = call.metadata.get(RELAY_TOKEN_HEADER)[0];
    if (!this.tokenHash || typeof presented !== 'string' || !sameHash(hashSecret(presented), this.tokenHash)) {
      // An 'error' event is how a grpc-js server stream ends with a status: it sends the status
      // and closes the call. destroy() sent none and left the HTTP/2 stream open: the caller
      // waited forever and this server held the call until the caller gave up.
      call.emit('error', { code: grpc.status.UNAUTHENTICATED, details: 'bad relay token' });
      return;
    }
    const stream = new RelayedJobs(call, this.logger);
    this.streams.add(stream);
    call.on('close', () => this.streams.delete(stream));
    call.on('data', (request: RelayRequest) => {
      if (request.request === 'credit') stream.credit(request.relayJobId, request.credit.bytes);
      else if (request.request === 'cancel') stream.cancel(request.relayJobId, request.cancel.reason);
      else if (request.request === 'job') this.start(stream, request.relayJobId, fromRelayJob(request.job));
    });
    // The relaying server went away (it stopped, crashed, or its network broke): nobody can receive the results.
    call.on('cancelled', () => stream.close('the relaying server went away'));
    call.on('end', () => {
      stream.close('the relaying server ended its stream');
      call.end();
    });
    call.on('error', (error) => this.logger.debug({ err: error }, 'relay stream ended'));
  }

  /** Ends every peer's stream (after this server's agents drained: their last events went out). Peers fail what is still open. */
  close(): void {
    for (const stream of this.streams) stream.end('the server stopped');
    this.streams.clear();
  }

  private start(stream: RelayedJobs, relayJobId: string, request: DispatchRequest): void {
    // The relaying server's dispatch span is the parent: this hop shows in the trace, and the agent's span is its child.
    const span = this.tracing && request.traceparent ? this.tracing.startSpan('relay', SpanKind.SERVER, parentOf(request.traceparent), {
      [ATTR.deploymentId]: request.deploymentId, [ATTR.requestModel]: request.model,
    }) : null;
    if (span) request.traceparent = traceparentOf(span);
    const listener = stream.listener(relayJobId, span);
    try {
      this.place(stream, relayJobId, request, listener, span);
    } catch (error) {
      if (this.replicaWait && !request.guest && error instanceof AppError && error.code === 'no_replica_available') {
        void this.placeOnceReady(stream, relayJobId, request, listener, span, error);
        return;
      }
      failBack(listener, error);
    }
  }

  /** Runs the job here now; throws when no replica here may take it. */
  private place(stream: RelayedJobs, relayJobId: string, request: DispatchRequest, listener: JobListener, span: Span | null): void {
    let job: Job;
    if (request.guest) {
      // The peer saw an idle guest slot here up to a heartbeat ago: it must still be idle now.
      const connection = this.placeGuest(request.deploymentId, request.adapter !== undefined);
      if (!connection) throw new AppError('shared_pool_busy', 'the shared replica has no idle guest slot now; retry shortly');
      job = this.dispatcher.dispatchTo(connection, request, listener);
    } else {
      // The relaying server's routing chose a replica here (its engine should hold the prefix): it, while it takes work.
      const chosen = request.replicaId ? this.dispatcher.connections(request.deploymentId).find((connection) =>
        connection.replicaId === request.replicaId && !connection.draining && !connection.closed) : undefined;
      job = chosen ? this.dispatcher.dispatchTo(chosen, request, listener) : this.dispatcher.dispatch(request, listener);
    }
    stream.started(relayJobId, job);
    span?.setAttribute(ATTR.replicaId, job.replicaId);
  }

  /** The job waits here for a first replica (RelayedReplicaWait), its deadline moved back by the wait, then runs. */
  private async placeOnceReady(stream: RelayedJobs, relayJobId: string, request: DispatchRequest, listener: JobListener, span: Span | null, refusal: AppError): Promise<void> {
    try {
      const waited = await this.replicaWait!(request.deploymentId, stream.presence(relayJobId));
      if (waited === 'not_waiting') throw refusal;
      if (waited === 'left') {
        listener.onFailed({ code: 'canceled', message: 'canceled while it waited for a replica', engineStatus: 0, engineBody: null, usage: undefined });
        return;
      }
      request.deadlineUnixMs += waited.waitedMs;
      this.place(stream, relayJobId, request, listener, span);
    } catch (error) {
      failBack(listener, error);
    }
  }
}

/** Failure codes a relayed job's refusal here keeps (the relaying server answers each as its own: openai/error-table.ts). */
const KEPT_REFUSALS = new Set(['shared_pool_busy', 'no_pod_available']);

/**
 * The job could not run here: its replicas left since the peer looked (`agent_draining`, the
 * peer's 503), a guest's slot was taken (`shared_pool_busy`, 429), or no replica started within
 * the cold-start queue's bounds (`no_pod_available`, 503).
 */
function failBack(listener: JobListener, error: unknown): void {
  const code = error instanceof AppError && KEPT_REFUSALS.has(error.code) ? error.code : 'agent_draining';
  const message = error instanceof AppError ? error.message : 'the server holding the replicas could not take the job';
  listener.onFailed({ code, message, engineStatus: 0, engineBody: null, usage: undefined });
}

/** The jobs one peer's stream carries here, and its outgoing events, written once per tick. */
class RelayedJobs {
  private readonly jobs = new Map<string, Job>();
  /** Jobs waiting here for a replica (RelayServer.placeOnceReady): what tells each that its client left. */
  private readonly waiting = new Map<string, () => void>();
  private pending: RelayEvent[] = [];
  private closed = false;

  constructor(private readonly call: RelayCall, private readonly logger: Logger) {}

  /** `span`: this hop's relay span, ended with the job's terminal event. */
  listener(relayJobId: string, span: Span | null): JobListener {
    const send = (jobEvent: JobEvent) => this.send({ relayJobId, event: 'jobEvent', jobEvent });
    const end = (jobEvent: JobEvent) => {
      send(jobEvent);
      this.jobs.delete(relayJobId);
      if (span) endJobSpan(span, jobEvent.completed ?? null, jobEvent.failed ?? null);
    };
    return {
      onChunk: (data) => send({ jobId: '', event: 'chunk', chunk: { data } }),
      onOutput: (data, contentType, objectKey) => send({ jobId: '', event: 'output', output: { data, contentType, objectKey } }),
      onProgress: (percent, stage) => send({ jobId: '', event: 'progress', progress: { percent, stage } }),
      // The relaying server times the job's wait in the agent's queue by these, as for a job of its own agents.
      onAccepted: (queued) => send({ jobId: '', event: 'accepted', accepted: { queued } }),
      onCompleted: (usage, finishReason) => end({ jobId: '', event: 'completed', completed: { usage: wireUsage(usage), finishReason } }),
      onFailed: (failure) => end({
        jobId: '', event: 'failed',
        failed: { code: failure.code, message: failure.message, engineStatus: failure.engineStatus, engineBody: failure.engineBody ?? Buffer.alloc(0), usage: wireUsage(failure.usage) },
      }),
    };
  }

  started(relayJobId: string, job: Job): void {
    if (job.finished) return;
    // It waited for a replica while the relaying server went away: nobody can receive its results.
    if (this.closed) {
      job.cancel('the relaying server went away');
      return;
    }
    this.jobs.set(relayJobId, job);
    this.send({ relayJobId, event: 'replicaId', replicaId: job.replicaId });
  }

  /** A waiting job's client as the cold-start queue sees it: it leaves when the job is canceled or this stream ends. */
  presence(relayJobId: string): ClientPresence {
    return {
      onLeft: (left) => {
        if (this.closed) {
          left();
          return () => {};
        }
        this.waiting.set(relayJobId, left);
        return () => this.waiting.delete(relayJobId);
      },
    };
  }

  cancel(relayJobId: string, reason: string): void {
    this.waiting.get(relayJobId)?.();
    this.jobs.get(relayJobId)?.cancel(reason || 'canceled by the relaying server');
  }

  /** The relaying server's client took more of the job's chunks: straight on to the agent. */
  credit(relayJobId: string, bytes: number): void {
    this.jobs.get(relayJobId)?.credit(bytes);
  }

  close(reason: string): void {
    if (this.closed) return;
    this.flush();
    this.closed = true;
    for (const left of [...this.waiting.values()]) left();
    this.waiting.clear();
    for (const job of this.jobs.values()) job.cancel(reason);
    this.jobs.clear();
  }

  /** This server stops: what is pending goes out, then the stream ends. */
  end(reason: string): void {
    this.close(reason);
    if (!this.call.cancelled) this.call.end();
  }

  /** Events of one event-loop turn leave as one message (setImmediate runs right after the I/O that produced them). */
  private send(event: RelayEvent): void {
    if (this.closed || this.call.cancelled) return;
    this.pending.push(event);
    if (this.pending.length === 1) setImmediate(this.flush);
  }

  private readonly flush = (): void => {
    const events = this.pending;
    this.pending = [];
    if (events.length === 0 || this.closed || this.call.cancelled) return;
    try {
      this.call.write({ events });
    } catch (error) {
      this.logger.debug({ err: error }, 'could not write to a relay stream that is ending');
    }
  };
}
