/**
 * TypeScript shapes of the `worker.v1` frames as @grpc/proto-loader decodes them with
 * LOADER_OPTIONS (camelCase fields, enums as strings, int64 as number, bytes as Buffer,
 * `oneofs: true` so every envelope names its set member in `frame` / `event`).
 * Shared by the control plane and the worker agent; no logic beyond loading the file.
 */
import path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';

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

export type EngineHealth =
  | 'ENGINE_HEALTH_UNSPECIFIED' | 'ENGINE_HEALTH_HEALTHY' | 'ENGINE_HEALTH_DEGRADED'
  | 'ENGINE_HEALTH_UNHEALTHY' | 'ENGINE_HEALTH_STARTING';

export type JobKind =
  | 'JOB_KIND_UNSPECIFIED' | 'JOB_KIND_CHAT_COMPLETION' | 'JOB_KIND_COMPLETION'
  | 'JOB_KIND_IMAGE_GENERATION' | 'JOB_KIND_IMAGE_EDIT' | 'JOB_KIND_VIDEO_GENERATION' | 'JOB_KIND_EMBEDDING';

export interface Gpu { name: string; memoryBytes: number; index: number }
export interface EngineInfo { kind: string; version: string; url: string }

export interface Hello {
  protocolVersion: number;
  agentVersion: string;
  joinToken: string;
  gpus: Gpu[];
  engine: EngineInfo;
  models: string[];
  maxConcurrency: number;
  agentId: string;
  /** The agent can put owner jobs before guest jobs (absent from agents older than shared serving). */
  priorityCapable?: boolean;
  /** The agent honours per-job stream windows and Credit (absent from agents older than flow control). */
  flowControl?: boolean;
}

export interface Heartbeat { inFlight: number; queued: number; engineHealth: EngineHealth; detail: string; loadPercent?: number }

export interface Usage { promptTokens: number; completionTokens: number; totalTokens: number }

/** Closed vocabulary of `Failed.code`; PROTOCOL.md says when each is used. */
export type JobFailureCode =
  | 'engine_error' | 'engine_unavailable' | 'engine_rejected' | 'canceled'
  | 'deadline_exceeded' | 'agent_draining' | 'invalid_job' | 'vram_exceeded'
  | 'model_timeout' | 'pod_crash' | 'storage_upload_failed';

export interface JobEvent {
  jobId: string;
  event?: 'accepted' | 'chunk' | 'progress' | 'output' | 'completed' | 'failed';
  accepted?: { queued: boolean };
  chunk?: { data: Buffer };
  progress?: { percent: number; stage: string };
  output?: { data: Buffer; contentType: string; objectKey: string };
  completed?: { usage?: Usage; finishReason: string };
  failed?: { code: JobFailureCode | string; message: string; engineStatus: number; engineBody: Buffer; usage?: Usage };
}

export interface AgentFrame {
  frame?: 'hello' | 'heartbeat' | 'jobEvent' | 'jobEvents';
  hello?: Hello;
  heartbeat?: Heartbeat;
  jobEvent?: JobEvent;
  jobEvents?: { events: JobEvent[] };
}

export interface Welcome {
  replicaId: string;
  deploymentId: string;
  model: string;
  protocolVersion: number;
  heartbeatIntervalMs: number;
  /** The replica serves shared-serving guests: owner jobs first, no job content in logs. */
  priorityScheduling?: boolean;
}

export interface InputFile { name: string; url: string; contentType: string }
export interface UploadTarget { url: string; headers: Record<string, string>; objectKey: string; contentType: string }

export interface Assign {
  jobId: string;
  kind: JobKind;
  deadlineUnixMs: number;
  body: Buffer;
  stream: boolean;
  includeUsage: boolean;
  model: string;
  /** Media jobs only (absent or empty for text). */
  inputs?: InputFile[];
  uploads?: UploadTarget[];
  inlineOutputs?: boolean;
  /** A shared-serving guest's job: after every waiting owner job, at the engine's low priority, never logged. */
  guest?: boolean;
  /** Embedding jobs only: the model's vector size and input limit (null when unset on the wire). */
  embedding?: EmbeddingSpec | null;
  /** Streamed jobs: chunk bytes the agent may send ahead of credit; 0 or absent = no window. */
  streamWindowBytes?: number;
}

export interface EmbeddingSpec { dimensions: number; maxInputTokens: number }

export interface ControlFrame {
  frame?: 'welcome' | 'assign' | 'cancel' | 'drain' | 'reject' | 'assignBatch' | 'credit';
  welcome?: Welcome;
  assign?: Assign;
  assignBatch?: { assigns: Assign[] };
  cancel?: { jobId: string; reason: string };
  drain?: { reason: string };
  reject?: { code: string; message: string };
  credit?: { jobId: string; bytes: number };
}
