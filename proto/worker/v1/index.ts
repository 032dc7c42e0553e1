/**
 * TypeScript shapes of the `worker.v1` frames as @grpc/proto-loader decodes them with
 * LOADER_OPTIONS (camelCase fields, enums as strings, int64 as number, bytes as Buffer,
 * `oneofs: true` so every envelope names its set member in `frame` / `event`). Derived from
 * the types generated from worker.proto (proto/generated, `npm run gen:proto`); the only
 * hand-written parts are the few narrowings below. Shared by the control plane and the worker
 * agent; no logic beyond loading the file.
 */
import path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import type { AdapterFormat__Output } from '../../generated/worker/v1/AdapterFormat';
import type { AdapterRef__Output } from '../../generated/worker/v1/AdapterRef';
import type { AdapterResidency__Output } from '../../generated/worker/v1/AdapterResidency';
import type { AdapterState__Output } from '../../generated/worker/v1/AdapterState';
import type { AgentFrame__Output } from '../../generated/worker/v1/AgentFrame';
import type { Assign__Output } from '../../generated/worker/v1/Assign';
import type { AssignBatch__Output } from '../../generated/worker/v1/AssignBatch';
import type { Completed__Output } from '../../generated/worker/v1/Completed';
import type { ControlFrame__Output } from '../../generated/worker/v1/ControlFrame';
import type { EmbeddingSpec__Output } from '../../generated/worker/v1/EmbeddingSpec';
import type { Engine__Output } from '../../generated/worker/v1/Engine';
import type { EngineHealth__Output } from '../../generated/worker/v1/EngineHealth';
import type { EngineSignals__Output } from '../../generated/worker/v1/EngineSignals';
import type { Failed__Output } from '../../generated/worker/v1/Failed';
import type { Gpu__Output } from '../../generated/worker/v1/Gpu';
import type { Heartbeat__Output } from '../../generated/worker/v1/Heartbeat';
import type { Hello__Output } from '../../generated/worker/v1/Hello';
import type { InputFile__Output } from '../../generated/worker/v1/InputFile';
import type { JobEvent__Output } from '../../generated/worker/v1/JobEvent';
import type { JobEventBatch__Output } from '../../generated/worker/v1/JobEventBatch';
import type { JobKind__Output } from '../../generated/worker/v1/JobKind';
import type { StartupPhase__Output } from '../../generated/worker/v1/StartupPhase';
import type { UploadTarget__Output } from '../../generated/worker/v1/UploadTarget';
import type { Usage__Output } from '../../generated/worker/v1/Usage';
import type { Welcome__Output } from '../../generated/worker/v1/Welcome';
import type { Members, Override, Unset } from '../../wire-shapes';

export const PROTOCOL_VERSION = 1;

export const PROTO_PATH = path.resolve(__dirname, '../../../../proto/worker/v1/worker.proto');

export const LOADER_OPTIONS: protoLoader.Options = {
  keepCase: false,
  longs: Number,
  enums: String,
  defaults: true,
  oneofs: true,
};

/**
 * worker.proto as protobufjs JSON, put here by the agent's single-file builds (an esbuild
 * `define`, worker-agent/packaging/build-agent.ts): the binary reads no file. Undefined elsewhere.
 */
declare const __WORKER_PROTO_JSON__: Parameters<typeof protoLoader.fromJSON>[0] | undefined;

/** Loads the service definition; the path works from both `proto/` (ts) and `dist/proto/`. */
export function loadWorkerService(): grpc.ServiceClientConstructor {
  const definition = typeof __WORKER_PROTO_JSON__ === 'object'
    ? protoLoader.fromJSON(__WORKER_PROTO_JSON__, LOADER_OPTIONS)
    : protoLoader.loadSync(require('node:fs').existsSync(PROTO_PATH) ? PROTO_PATH : path.resolve(__dirname, 'worker.proto'), LOADER_OPTIONS);
  const root = grpc.loadPackageDefinition(definition) as any;
  return root.worker.v1.WorkerService as grpc.ServiceClientConstructor;
}

export type EngineHealth = EngineHealth__Output;
export type JobKind = JobKind__Output;
export type Gpu = Gpu__Output;
export type EngineInfo = Engine__Output;
/**
 * The LoRA capacity fields are unset by agents that serve no adapter (a receiver reads 0);
 * `cachedModels` by agents without a weights cache (a receiver reads []).
 */
export type Hello = Unset<Hello__Output, 'maxLoras' | 'maxCpuLoras' | 'maxLoraRank' | 'cachedModels'>;
/** `Heartbeat.engine_signals`: the engine's own running / waiting requests, KV-cache use and prefix-cache hit rate. */
export type HeartbeatEngineSignals = EngineSignals__Output;
/**
 * `loadPercent` is sent only while the engine loads (STARTING); `engineSignals` only when the
 * engine reports them (a receiver gets null when they are absent, as from older agents);
 * `startupPhases` until the first ready heartbeat (a receiver reads [] after it, or from older agents).
 */
export type Heartbeat = Unset<Heartbeat__Output, 'loadPercent' | 'engineSignals' | 'adapters' | 'startupPhases'>;
/** One timed phase of an engine's start-up (`Heartbeat.startup_phases`): download, load, warm_up. */
export type StartupPhase = StartupPhase__Output;
/** One revision of a LoRA adapter as the agent loads it (`Assign.adapter`, docs/adapters.md). */
export type AdapterRef = AdapterRef__Output;
export type AdapterFormat = AdapterFormat__Output;
export type AdapterState = AdapterState__Output;
/** An adapter a replica holds or loads (`Heartbeat.adapters`). */
export type AdapterResidency = AdapterResidency__Output;
/** `cachedTokens` is optional here: an engine that does not report its prefix cache leaves it out (0 on the wire). */
export type Usage = Omit<Usage__Output, 'cachedTokens'> & { cachedTokens?: number };

/** A Usage as the wire message wants it (every field set). */
export function wireUsage(usage: Usage | undefined): Usage__Output | undefined {
  return usage && { ...usage, cachedTokens: usage.cachedTokens ?? 0 };
}

/** Closed vocabulary of `Failed.code`; PROTOCOL.md says when each is used. */
export type JobFailureCode =
  | 'engine_error' | 'engine_unavailable' | 'engine_rejected' | 'canceled'
  | 'deadline_exceeded' | 'agent_draining' | 'invalid_job' | 'vram_exceeded'
  | 'model_timeout' | 'pod_crash' | 'storage_upload_failed' | 'adapter_load_failed';

/** `usage` is left unset when the engine reported none. */
type Completed = Unset<Completed__Output, 'usage'>;
type Failed = Unset<Failed__Output, 'usage'>;

export type JobEvent = Override<Members<JobEvent__Output>, { completed?: Completed; failed?: Failed }>;

export type AgentFrame = Override<Members<AgentFrame__Output>, {
  hello?: Hello;
  heartbeat?: Heartbeat;
  jobEvent?: JobEvent;
  jobEvents?: Override<JobEventBatch__Output, { events: JobEvent[] }>;
}>;

export type Welcome = Welcome__Output;
export type InputFile = InputFile__Output;
export type UploadTarget = UploadTarget__Output;
export type EmbeddingSpec = EmbeddingSpec__Output;

/**
 * Fields a job without them leaves unset: media files (text jobs), `guest` (owner jobs),
 * `embedding` (all but embedding jobs), `streamWindowBytes` (no window), `batch` (live jobs),
 * `cacheSalt` (all but chat and completion jobs; a receiver reads '' when it is absent),
 * `traceparent` (tracing off; '' likewise), `adapter` (the base model; a receiver reads null).
 */
export type Assign = Unset<Assign__Output, 'inputs' | 'uploads' | 'inlineOutputs' | 'guest' | 'embedding' | 'streamWindowBytes' | 'batch' | 'cacheSalt' | 'traceparent' | 'adapter'>;

export type ControlFrame = Override<Members<ControlFrame__Output>, {
  assign?: Assign;
  assignBatch?: Override<AssignBatch__Output, { assigns: Assign[] }>;
}>;
