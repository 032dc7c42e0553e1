import type { RequestContent } from './request-content';

/** How a request ended, as its usage record and a guest's billing see it. */
export type WorkOutcome = 'succeeded' | 'failed' | 'canceled';

/**
 * One request of the pipeline, as it ended: what every observer of finished requests reads
 * (the per-deployment metrics, the minute rollups, the request log, the trace's last span). It
 * is built once per request, at its settlement, by the WorkTicket: the one place every path a
 * request can end by goes through (answered, failed, canceled by a client that left).
 */
export interface FinishedRequest {
  readonly workspaceId: string;
  readonly apiKeyId: string;
  /** The deployment that ran it (for a guest, the owner's deployment that served it). */
  readonly deploymentId: string;
  /** A guest's `shared/<model-id>`; null on an owner's request. */
  readonly sharedModel: string | null;
  /** The catalog model id the deployment serves (the metrics' `model` label). */
  readonly model: string;
  /**
   * The LoRA adapter the request ran with (docs/adapters.md): its id and the name the client
   * addressed it by; null for the base model. Usage records, the request log and the minute
   * rollups carry it; the metrics keep `model` the base model (adapters would make their label
   * sets unbounded) and count the request toward the base deployment.
   */
  readonly adapter?: { readonly id: string; readonly name: string; readonly revision: number } | null;
  /** `chat.completions`, `completions`, `responses`, `embeddings`. */
  readonly endpoint: string;
  readonly stream: boolean;
  /** A batch line's batch; undefined for live requests. */
  readonly batchId: string | undefined;
  readonly outcome: WorkOutcome;
  /** The engine's finish reason (`stop`, `length`, `tool_calls`, …), or null when no job completed. */
  readonly finishReason: string | null;
  /** A failed or canceled request's code (`engine_error`, `canceled`, `deadline_exceeded`, …); null when it succeeded. */
  readonly errorCode: string | null;
  readonly promptTokens: number;
  readonly completionTokens: number;
  /** Prompt tokens the engine served from its prefix cache, where it reports them (0 otherwise). */
  readonly cachedTokens: number;
  /** When it arrived, in Unix ms. */
  readonly startedAt: number;
  readonly latencyMs: number;
  /** Streams: the first byte's latency; null for a request answered in one piece (or with no byte). */
  readonly ttftMs: number | null;
  /** The replica that ran it (always, even a guest's: observers that show it to a guest must not). */
  readonly replicaId: string | null;
  /** The gateway's request id (`x-request-id`); null where no HTTP request carried it (a batch line). */
  readonly requestId: string | null;
  /** The W3C trace id of the request's trace, when tracing is on. */
  readonly traceId: string | null;
  /** When each step of the request happened, for the request log's timeline; null where none was marked. */
  readonly phases: RequestPhases | null;
  /** Its request and answer bodies, only where its workspace stores them (request log); absent otherwise. */
  readonly content?: RequestContent | undefined;
}

/**
 * A request's steps, each in ms after its arrival (`startedAt`); a step it never reached is
 * absent. Marked on the request path whether or not tracing is on (a few numbers per request),
 * so the console's timeline needs no trace backend.
 */
export interface RequestPhases {
  /** Admission done (credit, RPM and TPD hold, the pool slot of a guest). */
  admittedMs?: number;
  /** A replica was chosen and the job sent to it (here or through a peer server). */
  dispatchedMs?: number;
  /** The agent began running it (the end of its wait in the agent's queue). */
  startedMs?: number;
  /** Its first byte reached the client (streams). */
  firstTokenMs?: number;
  /** Settled: the last event of its last job. */
  endedMs?: number;
}

/** Hears each finished request, synchronously on the request path: keep it to a few field writes. */
export interface RequestObserver {
  requestFinished(request: FinishedRequest): void;
}

/** Several observers as one; an observer that throws is not allowed to stop the others or the settlement. */
export class RequestObservers implements RequestObserver {
  private readonly observers: RequestObserver[] = [];

  constructor(private readonly onError: (error: unknown) => void = () => {}) {}

  add(observer: RequestObserver): void {
    this.observers.push(observer);
  }

  requestFinished(request: FinishedRequest): void {
    for (const observer of this.observers) {
      try {
        observer.requestFinished(request);
      } catch (error) {
        this.onError(error);
      }
    }
  }
}
