/**
 * Everything a worker agent is configured with. Each option names its flag (where it has one)
 * and its environment variable; the control plane spawns local agents with the variables, so
 * their names are part of the contract. Validated at boot: `main` exits with code 2 on error.
 */
import { randomBytes } from 'node:crypto';
import { DEFAULT_AGENT_DRAIN_TIMEOUT_MS } from '../common/agent-drain';
import { z } from 'zod';
import { AGENT_ENGINE_KINDS } from '../common/engine-kinds';
import type { Gpu } from '../proto/worker/v1/index';
import { cpuEngineOptionFields } from './engines/cpu-engine-options';
import { llamaCppOptionFields } from './llama/llama-cpp-options';
import { adapterOptionFields } from './engines/adapter-options';
import { modelCacheOptionFields } from './engines/model-cache-options';
import { parseGpuList } from './gpu-inventory';
import { describe, integerOption, loadOptionFields, optionField, OptionsError, switchField, type OptionsOf } from './option-fields';

const GPU_FORMAT = 'must be JSON like [{"name":"H100","memoryGiB":80}] or "name:memGiB,..."';

export const agentOptionFields = {
  /** Control plane's agent gRPC endpoint, `host:port`. Required. */
  controlPlaneAddress: optionField(z.string().regex(/^\S+$/, 'must be host:port without spaces'), 'WORKER_CONTROL_PLANE', 'control-plane'),
  /** Secret issued by the control plane for a replica or deployment. Required. */
  joinToken: optionField(z.string().min(1), 'WORKER_JOIN_TOKEN', 'join-token'),
  /** Stable id for this agent's lifetime; reconnects reuse it. @default random `agt_<hex>` */
  agentId: optionField(
    z.string().regex(/^[\w.-]{1,128}$/, 'letters, digits, "_", "." and "-" only').default(() => `agt_${randomBytes(8).toString('hex')}`),
    'WORKER_AGENT_ID', 'agent-id'),
  /** Engine adapter: the built-in `cpu` engine, an `openai`-compatible HTTP engine, or `llama-cpp` (a GGUF file on the CPU). @default cpu */
  engineKind: optionField(z.enum(AGENT_ENGINE_KINDS).default('cpu'), 'WORKER_ENGINE', 'engine'),
  /** Engine base URL, with or without `/v1` (e.g. http://gpu-host:8000). Required for `openai`. */
  engineUrl: optionField(z.url({ protocol: /^https?$/ }).optional(), 'WORKER_ENGINE_URL', 'engine-url'),
  /**
   * Model name sent to the openai engine instead of the job's catalog model (vLLM's
   * served-model-name); answers carry the catalog model all the same. @default the job's model
   */
  engineModel: optionField(z.string().min(1).optional(), 'WORKER_ENGINE_MODEL', 'engine-model'),
  /** Bearer token for the engine; env only, so it never shows in `ps`. @default none */
  engineApiKey: optionField(z.string().min(1).optional(), 'WORKER_ENGINE_API_KEY'),
  /**
   * The `openai` engine runs priority scheduling, lower values first: vLLM with
   * `--scheduling-policy priority`, SGLang with `--enable-priority-scheduling
   * --schedule-low-priority-values-first` (SGLang alone serves higher values first, which would
   * put guests before owners). Only then does the agent offer to serve shared-serving guests
   * (Hello.priority_capable) and send their jobs with `"priority": 10`; vLLM answers an error to
   * a non-zero priority without that policy. The built-in engines need no flag: their queue is
   * the agent's own. @default false
   */
  enginePriorityScheduling: switchField('WORKER_ENGINE_PRIORITY_SCHEDULING', 'engine-priority-scheduling'),
  /**
   * Where the `openai` engine publishes its Prometheus metrics, under its base URL without
   * `/v1` (vLLM: always; SGLang: with `--enable-metrics`). The agent reads the engine's running
   * and waiting requests, KV-cache use and prefix-cache hit rate there once per heartbeat and
   * sends them on it; a scrape that fails only leaves them out. `off` reads none. @default /metrics
   */
  engineMetricsPath: optionField(
    z.string().regex(/^(off|\/[^\s?#]*)$/, 'must be a path such as /metrics, or off').default('/metrics'),
    'WORKER_ENGINE_METRICS_PATH', 'engine-metrics-path'),
  /**
   * Whether the `openai` engine gets each chat and completion job's `cache_salt` (its
   * workspace's, from the control plane), which keeps every workspace's prefix cache its own:
   * vLLM 0.9 and later (V1 engine) and SGLang with sgl-project/sglang#23300 honour it. `off` for
   * an engine that cannot (vLLM's V0 engine answers 400 to the field; older vLLM and SGLang take
   * it and share their cache anyway): nothing is sent, and the agent serves no shared-serving
   * guests, whose prompts would share the owner's cache. A llama.cpp server (it answers
   * `owned_by: "llamacpp"`) has no salt: it never serves guests either way. The built-in engines
   * always key their caches by the salt. @default on
   */
  engineCacheSalt: optionField(z.enum(['on', 'off']).default('on'), 'WORKER_ENGINE_CACHE_SALT', 'engine-cache-salt'),
  /** Engine calls run at once; further accepted jobs wait in a local FIFO queue (owner jobs first on a shared replica). @default 64 */
  maxConcurrency: optionField(integerOption(1, 100_000).default(64), 'WORKER_MAX_CONCURRENCY', 'max-concurrency'),
  /** First reconnect delay ceiling, in milliseconds; doubles per failed attempt. @default 250 */
  reconnectInitialMs: optionField(integerOption(1).default(250), 'WORKER_RECONNECT_INITIAL_MS'),
  /** Largest reconnect delay ceiling, in milliseconds. @default 10000 */
  reconnectMaxMs: optionField(integerOption(1).default(10_000), 'WORKER_RECONNECT_MAX_MS'),
  /**
   * How often the agent pings the control plane (HTTP/2 PING, gRPC keepalive) while its stream
   * is open, in milliseconds. Heartbeats tell the control plane the agent lives; only these pings
   * tell the agent that the control plane does: a stream silent because the network dropped it
   * (no FIN, no RST) is ended after this plus `keepaliveTimeoutMs`, then the agent reconnects.
   * @default 30000
   */
  keepaliveIntervalMs: optionField(integerOption(100).default(30_000), 'WORKER_KEEPALIVE_INTERVAL_MS'),
  /** How long a keepalive ping may go unanswered before the connection counts as dead, in milliseconds. @default 10000 */
  keepaliveTimeoutMs: optionField(integerOption(100).default(10_000), 'WORKER_KEEPALIVE_TIMEOUT_MS'),
  /** On Drain or SIGTERM, how long in-flight jobs may still run before failing with `agent_draining`. @default 30000 */
  drainTimeoutMs: optionField(integerOption(0).default(DEFAULT_AGENT_DRAIN_TIMEOUT_MS), 'WORKER_DRAIN_TIMEOUT_MS'),
  /** Connect timeout to the engine, and the timeout of each health probe, in milliseconds. @default 5000 */
  engineConnectTimeoutMs: optionField(integerOption(1).default(5_000), 'WORKER_ENGINE_CONNECT_TIMEOUT_MS'),
  /** How often the engine's health is probed (`GET /v1/models`), in milliseconds. @default 5000 */
  engineHealthIntervalMs: optionField(integerOption(100).default(5_000), 'WORKER_ENGINE_HEALTH_INTERVAL_MS'),
  /**
   * Exit at once, without a drain, when the process that spawned the agent dies (kill -9
   * included): stdin must be a pipe from it, which it never writes to or closes; its end
   * closing is the signal (`parent-pipe.ts`). The server's `local` provider sets it on every
   * agent it spawns, so none outlives its server or joins another. Leave it off for agents on
   * GPU hosts: they outlive their control plane on purpose and reconnect. @default false
   */
  exitWithParent: switchField('WORKER_EXIT_WITH_PARENT', 'exit-with-parent'),
  /** GPUs reported in Hello: JSON or `name:memGiB,...`. @default none (the CPU engine has none) */
  gpus: optionField(
    z.string().refine((text) => parseGpuList(text) !== undefined, GPU_FORMAT).transform((text) => parseGpuList(text) as Gpu[]).default([]),
    'WORKER_GPUS'),
  /** pino log level; logs go to stderr as JSON lines. @default info */
  logLevel: optionField(z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'), 'WORKER_LOG_LEVEL', 'log-level'),
  ...cpuEngineOptionFields,
  ...llamaCppOptionFields,
  ...adapterOptionFields,
  ...modelCacheOptionFields,
};

export type AgentOptions = OptionsOf<typeof agentOptionFields>;

/** Reads flags from `argv` (without the node and script paths) and variables from `env`. */
export function loadAgentOptions(argv: readonly string[], env: NodeJS.ProcessEnv = process.env): AgentOptions {
  const options = loadOptionFields('worker agent', agentOptionFields, argv, env);
  if (options.engineKind === 'openai' && !options.engineUrl) {
    throw new OptionsError(`invalid worker agent options: ${describe(agentOptionFields.engineUrl)} is required with --engine openai`);
  }
  if (options.engineKind === 'llama-cpp' && !options.llamaModelPath && !options.llamaModelUrl) {
    throw new OptionsError(`invalid worker agent options: ${describe(agentOptionFields.llamaModelPath)} or ${describe(agentOptionFields.llamaModelUrl)} is required with --engine llama-cpp`);
  }
  if (options.llamaModelPath && options.llamaModelUrl) {
    throw new OptionsError(`invalid worker agent options: give ${describe(agentOptionFields.llamaModelPath)} or ${describe(agentOptionFields.llamaModelUrl)}, not both`);
  }
  if (options.llamaModelSha256 && !options.llamaModelUrl) {
    throw new OptionsError(`invalid worker agent options: ${describe(agentOptionFields.llamaModelSha256)} checks a fetched file: it needs ${describe(agentOptionFields.llamaModelUrl)}`);
  }
  if (options.reconnectMaxMs < options.reconnectInitialMs) {
    throw new OptionsError(`invalid worker agent options: ${describe(agentOptionFields.reconnectMaxMs)} must be >= ${describe(agentOptionFields.reconnectInitialMs)}`);
  }
  return options;
}

/** One line per option for `--help`. */
export function agentOptionsUsage(): string {
  return Object.entries(agentOptionFields).map(([name, field]) => `  ${describe(field).padEnd(52)} ${name}`).join('\n');
}
