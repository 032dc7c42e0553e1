/**
 * What the agent needs from an inference engine. Adapters (an OpenAI-compatible HTTP engine,
 * the built-in CPU engine) hand over bytes exactly as the engine produced them, so the agent
 * never parses and re-serialises a token chunk; only usage and the finish reason are peeked.
 */
import type { AgentEngineKind } from '../../common/engine-kinds';
import type { AdapterRef, EmbeddingSpec, EngineHealth, JobKind, Usage } from '../../proto/worker/v1/index';
import type { AdapterResidencyView } from './adapter-slots';
import type { JobCancellation } from '../job-cancellation';
import type { JobPreemption } from '../job-preemption';
import type { EngineSignalsAnswer } from './engine-signals';
import type { StartupPhases } from '../startup-phases';

/** One assigned job as the engine sees it (the transport-level fields of `Assign`). */
export interface EngineJob {
  readonly jobId: string;
  readonly kind: JobKind;
  /** The client's JSON body, unknown fields included. */
  readonly body: Buffer;
  readonly stream: boolean;
  /** The client asked for `stream_options.include_usage`; otherwise the usage chunk is dropped. */
  readonly includeUsage: boolean;
  /**
   * Catalog model id; adapters send their configured engine model name instead when set, and
   * every answer carries this id in `model` all the same (model-rename.ts).
   */
  readonly model: string;
  /**
   * A shared-serving guest's job: sent at the engine's low priority, and nothing of its body,
   * output or engine error text may reach a log at any level (only ids, codes and sizes).
   */
  readonly guest?: boolean;
  /** A line of a batch: sent below guests to an engine that schedules by priority. */
  readonly batch?: boolean;
  /**
   * Chat and completion jobs: the tenant's prefix-cache salt (`Assign.cache_salt`; '' or absent
   * from a control plane older than it). A job may reuse only prefixes that jobs of the same salt
   * left: an HTTP engine gets it as `cache_salt`, the built-in engines key their caches by it.
   */
  readonly cacheSalt?: string;
  /** Embedding jobs: the catalog's vector size and input limit of the model. */
  readonly embedding?: EmbeddingSpec | null;
  /**
   * The trace context of the agent's engine-call span, when tracing is on: an HTTP engine gets it
   * as the request's `traceparent` header, so its own spans (vLLM's) join the request's trace.
   */
  readonly traceparent?: string;
  /**
   * Chat and completion jobs addressed to a LoRA adapter (docs/adapters.md): the engine loads it
   * first when it does not hold it, runs the job with it, and answers with its `display_name` in
   * `model`. Null or absent: the base model.
   */
  readonly adapter?: AdapterRef | null;
}

/**
 * Receives a job's output. A returned promise means the consumer (the gRPC stream) is
 * saturated: the engine must await it before reading more from upstream, which is what keeps
 * the agent's memory bounded when the control plane reads slowly.
 */
export interface EngineSink {
  /** One or more whole SSE events (`data: {...}\n\n`), never the engine's `data: [DONE]`. */
  chunk(data: Buffer): Promise<void> | undefined;
  /** A whole non-streamed response body. */
  output(data: Buffer, contentType: string): Promise<void> | undefined;
}

export interface EngineResult {
  readonly usage: Usage;
  readonly finishReason: string;
  /** True when the engine reported no usage and the agent estimated it. */
  readonly usageEstimated: boolean;
  /** The answer's own `id` (`chatcmpl-…`) where the agent read it anyway (a whole body, a stream's usage chunk), for the job's trace. */
  readonly responseId?: string;
}

export interface EngineHealthReport {
  readonly status: EngineHealth;
  /** Human-readable reason when not healthy; the current stage while starting. */
  readonly detail: string;
  /** While STARTING: how far the model download / load is, 0–100. */
  readonly loadPercent?: number;
}

/** An image or video job as the engine sees it: the job body and its input files, fetched. */
export interface MediaJob {
  readonly jobId: string;
  readonly kind: JobKind;
  readonly model: string;
  /** The normalised job parameters the control plane sent (prompt, size, n, fps, frames, …). */
  readonly params: Record<string, unknown>;
  /** Input files by name: `image`, `mask`, `input_reference`. */
  readonly inputs: ReadonlyMap<string, Buffer>;
}

/** The files a media job produced, in output order (the agent uploads and reports them). */
export interface MediaFiles {
  readonly files: Buffer[];
  readonly contentType: string;
}

/** Reports 0–99 % while a media job works; never awaited (progress is advisory). */
export type ProgressReporter = (percent: number, stage: string) => void;

/** Reports how far a model download / load is (0–100, may be fractional) and what it is doing. */
export type LoadProgress = (percent: number, stage: string) => void;

export type BatchPreemption = 'suspend' | 'engine';

export interface Engine {
  /** `Hello.engine.kind`: the `--engine` that made it. */
  readonly kind: AgentEngineKind;
  readonly version: string;
  /** Informational engine address; empty for in-process engines. */
  readonly url: string;
  /**
   * Guest jobs can run below owner jobs (`Hello.priority_capable`): always for in-process
   * engines, whose only queue is the agent's owner-first one; for an HTTP engine only when it
   * runs priority scheduling, since its own batch would otherwise serve guests and owners alike.
   */
  readonly priorityCapable: boolean;
  /**
   * What the agent may do with a running batch line when a live job finds every slot taken
   * (job-runner.ts): `suspend`, the engine pauses the line through the JobPreemption `run` is
   * given and takes it up again later; `engine`, the engine orders its own work by request
   * priority, so the live job goes in beside the line and runs first. Absent: the live job waits
   * for a slot, behind at most one line per slot.
   */
  readonly batchPreemption?: BatchPreemption;
  /**
   * The LoRA adapters the engine hot-loads: its capacity (Hello) and what it holds (every
   * heartbeat; a change sends one early). Absent: the engine serves no adapter.
   */
  readonly adapters?: AdapterResidencyView;
  /**
   * What the agent's Hello needs, quickly, before it joins (llama-cpp: opens llama.cpp for its
   * version and checks the model file). Throws `EngineStartError` when the engine cannot serve.
   */
  prepare?(): Promise<void>;
  /**
   * Gets the engine ready: loads its model (in-process engines, reporting `progress`) or probes
   * it once, bounded in time, and starts periodic health checks. Throws `EngineStartError`
   * when the engine cannot serve at all. `phases`: where the engine times its start-up
   * (download, load, warm-up: startup-phases.ts); an engine marks only the phases it has.
   */
  start(progress?: LoadProgress, phases?: StartupPhases): Promise<void>;
  /** Model names the engine reported it serves; empty when unknown. */
  models(): readonly string[];
  health(): EngineHealthReport;
  /**
   * The engine's own load (engine-signals.ts), sent on heartbeats: a value when read from the
   * engine's own state (in-process engines; the agent may read it every few hundred ms), a
   * promise when it must be fetched (an HTTP engine's /metrics; read once per heartbeat).
   * Null, or absent, when the engine reports none; never throws.
   */
  signals?(): EngineSignalsAnswer;
  /**
   * Runs one job. Resolves once the engine finished; throws `EngineFailure` with a protocol
   * code otherwise. Aborting `cancellation` closes the upstream call at once; the rejection
   * then carries the usage produced so far (`EngineFailure.usage`), so it can be metered.
   * `preemption`: given for batch lines on a `suspend` engine; the line's work stands still
   * while it is paused.
   */
  run(job: EngineJob, sink: EngineSink, cancellation: JobCancellation, preemption?: JobPreemption): Promise<EngineResult>;
  /**
   * Runs an image or video job; absent on text-only engines (their media jobs fail with
   * `invalid_job`). Throws `EngineFailure` (`vram_exceeded`, `engine_rejected`, …) otherwise.
   */
  generateMedia?(job: MediaJob, progress: ProgressReporter, cancellation: JobCancellation): Promise<MediaFiles>;
  close(): Promise<void>;
}
