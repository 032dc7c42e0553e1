import path from 'node:path';
import { z } from 'zod';
import { AGENT_ENGINE_KINDS } from '../../common/engine-kinds';
import { PROJECT_ROOT } from '../project-root';
import { boolField, ConfigError, intField, loadEnv } from './env-fields';

const shape = {
  /** External PostgreSQL; when unset an embedded PostgreSQL is started with data in `dataDir`. */
  databaseUrl: z.string().url().optional(),
  /** Where the embedded database (and later local object storage) keeps its files. @default ./data */
  dataDir: z.string().default('./data'),
  /** Port of the embedded PostgreSQL; 0 picks a free one at each start. @default 0 */
  embeddedDatabasePort: intField(0, 65535).default(0),
  /** How often the embedded PostgreSQL is checked for life (it is restarted when it died). @default 1000 */
  embeddedDatabaseWatchMs: intField(50).default(1_000),
  /** Restarts tried when the embedded PostgreSQL died, before the server exits non-zero (code 4) for its supervisor; 0: exit at once. @default 3 */
  embeddedDatabaseRestarts: intField(0, 20).default(3),
  /**
   * Interface the agent gRPC server binds. Loopback, like HTTP: the port admits agents and has no
   * TLS. Agents on other machines (external and static deployments, Kubernetes pods) need
   * `0.0.0.0` or an interface address; the server warns at start when they cannot connect. @default 127.0.0.1
   */
  grpcHost: z.string().default('127.0.0.1'),
  /** Agent gRPC port; 0 picks a free one (tests). @default 50051 */
  grpcPort: intField(0, 65535).default(50051),
  /** `host:port` other servers on the same database reach this one's gRPC port at, to relay jobs to its agents. @default 127.0.0.1:<the gRPC port> (GRPC_HOST:<port> when GRPC_HOST is an interface address) */
  clusterAddress: z.string().regex(/^\S+:\d+$/, 'must be host:port').optional(),
  /** How often a server writes its liveness and load for its peers, and reads theirs. @default 1000 */
  clusterHeartbeatIntervalMs: intField(10).default(1_000),
  /** A server silent this long is gone: peers stop relaying to it and the leader ends its replicas. @default 5000 */
  clusterServerTimeoutMs: intField(100).default(5_000),
  /** An agent must send Hello within this time after opening its stream. @default 10000 */
  helloTimeoutMs: intField(1).default(10_000),
  /** Heartbeat interval announced in Welcome; silence for 3x this ends the stream. @default 5000 */
  heartbeatIntervalMs: intField(10).default(5_000),
  /**
   * PostgreSQL `statement_timeout` of the queries a tenant's request causes (GraphQL operations,
   * subscription events, REST lists), run on a pool of their own; a query past it is cancelled
   * and answered 503. 0 disables it (and the second pool). @default 5000
   */
  tenantStatementTimeoutMs: intField(0).default(5_000),
  /** How long an authenticated API key stays cached in memory. @default 5000 */
  apiKeyCacheTtlMs: intField(0).default(5_000),
  /** How long a console sign-in link (printed by `npm start` on the embedded defaults) can be used, once. @default 600000 */
  consoleSignInTtlMs: intField(1_000, 86_400_000).default(600_000),
  /**
   * Console sign-in attempts (`redeemSignInLink`, served without a key) one client may make in
   * any minute; the client is the socket's address (an IPv6 /64), never a forwarding header. @default 10
   */
  consoleSignInPerClientPerMinute: intField(1).default(10),
  /** Console sign-in attempts this server takes in any minute from all clients together. @default 120 */
  consoleSignInPerServerPerMinute: intField(1).default(120),
  /** Default requests-per-minute limit of a new API key. @default 600 */
  defaultRpmLimit: intField(1).default(600),
  /** Default tokens-per-day limit of a new API key (UTC day). @default 1000000 */
  defaultTpdLimit: intField(1).default(1_000_000),
  /** Usage records are written in batches at most this far apart. @default 250 */
  usageFlushIntervalMs: intField(1).default(250),
  /** Prefix-aware routing's bounded load: a replica takes a request while its load is under (1 + this) times the average. @default 0.25 */
  routingLoadFactor: z.coerce.number().min(0).max(10).default(0.25),
  /** Prefix-aware routing: replicas each application's prompts (its leading instructions) go to first. @default 2 */
  routingHomeReplicas: intField(1, 1024).default(2),
  /** AES-256-GCM key sealing secrets the platform must read back (customers' bucket secrets, webhook signing secrets); 64 hex characters or base64 of 32 bytes. Unset: `<dataDir>/secrets-encryption.key`, created once. */
  secretsEncryptionKey: z.string().optional(),
  /** Redis shared by every server instance for rate limits; unset keeps limits in this process. */
  redisUrl: z.string().url().optional(),
  /** Prefix of every Redis key the server writes (several installations can share one Redis). @default inference: */
  redisKeyPrefix: z.string().default('inference:'),
  /** Local provider: engine kind for spawned agents (`cpu`, `openai` with localEngineUrl, or `llama-cpp` serving localModelPath for every text model). @default cpu */
  localEngine: z.enum(AGENT_ENGINE_KINDS).default('cpu'),
  /** Local provider: engine URL when localEngine is `openai`. */
  localEngineUrl: z.string().url().optional(),
  /** Local provider: a GGUF file served with llama.cpp on the CPU, as catalog model `local/<file name>`; a first start deploys it. */
  localModelPath: z.string().min(1).transform((file) => path.resolve(file)).optional(),
  /** Local provider: CPU threads of each llama.cpp agent. @default half the cores, 1 to 4 (see worker-agent) */
  localLlamaThreads: intField(1, 1024).optional(),
  /** Local provider: tokens per sequence of llama.cpp agents. @default 4096, at most the model's training context */
  localLlamaContextSize: intField(16, 1 << 20).optional(),
  /** Local provider: sequences (parallel requests) of each llama.cpp agent. @default 2 */
  localLlamaParallel: intField(1, 256).optional(),
  /** Local provider: sequences each llama.cpp agent keeps for prefix reuse (at least the parallel ones; each costs a context of KV memory). @default LOCAL_LLAMA_PARALLEL */
  localLlamaCachedSequences: intField(1, 1024).optional(),
  /** Local provider: max concurrency of each spawned agent of a text model. @default 64 */
  localMaxConcurrency: intField(1).default(64),
  /** Local provider: concurrency of agents of image/video models; unset = the model's targetConcurrency. */
  localMediaMaxConcurrency: intField(1).optional(),
  /** Local and market providers: CPU-engine agents act out downloading their model for this long, reporting load progress (first agent of a model on this machine; every new market host). @default 0 */
  localModelDownloadMs: intField(0).default(0),
  /** Local provider: delay before restarting an agent process that exited. @default 1000 */
  localRestartDelayMs: intField(0).default(1_000),
  /** Local provider: extra `node` flags for agent processes, space-separated (profiling). */
  localAgentNodeArgs: z.string().default('').transform((value) => value.split(/\s+/).filter(Boolean)),
  /** Local provider: spawn agents at all (off for control planes whose agents are remote). @default true */
  localAgents: boolField().default(true),
  /** Kubernetes provider: its settings file (deploy/kubernetes/values.example.yaml); unset, no `kubernetes` provider. */
  kubernetesConfigFile: z.string().min(1).optional(),
  /** Where the worker agent's single binary is (served at /agent/{version}/…, fetched by Kubernetes pods). @default dist/bin */
  agentBinaryDir: z.string().min(1).optional(),
  /** Local provider: what this machine offers placement (GPU name, memory, hourly price). @default cpu, 80 GB, $0 */
  localGpuName: z.string().min(1).default('cpu'),
  localGpuMemoryGb: z.coerce.number().positive().default(80),
  localPricePerHour: z.coerce.number().min(0).default(0),
  /** Market provider: seed of the simulated marketplace (same seed, same offers). @default 42 */
  marketSeed: intField(0).default(42),
  /** Market provider: prices take a random-walk step this often; 0 keeps them still. @default 60000 */
  marketPriceDriftIntervalMs: intField(0).default(60_000),
  /** Market provider: largest relative price change per step. @default 0.05 */
  marketVolatility: z.coerce.number().min(0).max(1).default(0.05),
  /** Running replicas are billed up to now this often (the ledger's granularity). @default 60000 */
  meteringIntervalMs: intField(10).default(60_000),
  /** How often each deployment is autoscaled and its missing replicas placed again. @default 5000 */
  capacityIntervalMs: intField(10).default(5_000),
  /** A replica whose agent stays gone this long loses its host and is replaced. @default 60000 */
  replicaLostGraceMs: intField(0).default(60_000),
  /** A replica whose engine is not ready this long after its placement is replaced, counted as a start failure. @default 1800000 (30 min: the Kubernetes engine's own start-up probe) */
  replicaStartDeadlineMs: intField(1_000).default(1_800_000),
  /** After a replica fails to start, the next is placed after this; doubling with each failure in a row. @default 10000 */
  replicaStartBackoffBaseMs: intField(0).default(10_000),
  /** The start back-off's ceiling. @default 600000 */
  replicaStartBackoffMaxMs: intField(0).default(600_000),
  /** Autoscaler: the load signal is averaged over this window. @default 10000 */
  autoscaleWindowMs: intField(1).default(10_000),
  /** Autoscaler: more replicas only when wanted for this long (0 = at once). @default 0 */
  autoscaleScaleUpStabilizationMs: intField(0).default(0),
  /** Autoscaler: fewer replicas only when wanted for this long. @default 300000 */
  autoscaleScaleDownStabilizationMs: intField(0).default(300_000),
  /**
   * Scale to zero: the longest a request waits at a gateway for a first replica of its deployment
   * (one scaled to zero, or starting); past it, 503 `no_pod_available` with Retry-After. @default 300000
   */
  coldStartMaxWaitMs: intField(1, 3_600_000).default(300_000),
  /** Scale to zero: a replica's start-up as Retry-After estimates it until one has been measured on the server. @default 60000 */
  coldStartEstimateMs: intField(0, 3_600_000).default(60_000),
  /** Bearer token of the operator API (static hosts, the market, catalog, credit); unset disables it. */
  operatorToken: z.string().min(24).optional(),
};

const names = {
  databaseUrl: 'DATABASE_URL', dataDir: 'DATA_DIR', embeddedDatabasePort: 'EMBEDDED_DATABASE_PORT',
  embeddedDatabaseWatchMs: 'EMBEDDED_DATABASE_WATCH_MS', embeddedDatabaseRestarts: 'EMBEDDED_DATABASE_RESTARTS',
  grpcHost: 'GRPC_HOST', grpcPort: 'GRPC_PORT', clusterAddress: 'CLUSTER_ADDRESS',
  clusterHeartbeatIntervalMs: 'CLUSTER_HEARTBEAT_INTERVAL_MS', clusterServerTimeoutMs: 'CLUSTER_SERVER_TIMEOUT_MS', helloTimeoutMs: 'AGENT_HELLO_TIMEOUT_MS',
  heartbeatIntervalMs: 'AGENT_HEARTBEAT_INTERVAL_MS', apiKeyCacheTtlMs: 'API_KEY_CACHE_TTL_MS', tenantStatementTimeoutMs: 'TENANT_STATEMENT_TIMEOUT_MS',
  consoleSignInTtlMs: 'CONSOLE_SIGN_IN_TTL_MS', consoleSignInPerClientPerMinute: 'CONSOLE_SIGN_IN_PER_CLIENT_PER_MINUTE',
  consoleSignInPerServerPerMinute: 'CONSOLE_SIGN_IN_PER_SERVER_PER_MINUTE', defaultRpmLimit: 'DEFAULT_RPM_LIMIT', defaultTpdLimit: 'DEFAULT_TPD_LIMIT',
  usageFlushIntervalMs: 'USAGE_FLUSH_INTERVAL_MS', routingLoadFactor: 'ROUTING_LOAD_FACTOR', routingHomeReplicas: 'ROUTING_HOME_REPLICAS', redisUrl: 'REDIS_URL', secretsEncryptionKey: 'SECRETS_ENCRYPTION_KEY', redisKeyPrefix: 'REDIS_KEY_PREFIX', localEngine: 'LOCAL_ENGINE',
  localEngineUrl: 'LOCAL_ENGINE_URL', localMaxConcurrency: 'LOCAL_AGENT_MAX_CONCURRENCY', localMediaMaxConcurrency: 'LOCAL_MEDIA_AGENT_MAX_CONCURRENCY',
  localModelPath: 'LOCAL_MODEL_PATH', localLlamaThreads: 'LOCAL_LLAMA_THREADS', localLlamaContextSize: 'LOCAL_LLAMA_CONTEXT_SIZE', localLlamaParallel: 'LOCAL_LLAMA_PARALLEL',
  localLlamaCachedSequences: 'LOCAL_LLAMA_CACHED_SEQUENCES',
  localRestartDelayMs: 'LOCAL_AGENT_RESTART_DELAY_MS', localModelDownloadMs: 'LOCAL_MODEL_DOWNLOAD_MS', localAgents: 'LOCAL_AGENTS', localAgentNodeArgs: 'LOCAL_AGENT_NODE_ARGS',
  kubernetesConfigFile: 'KUBERNETES_CONFIG_FILE', agentBinaryDir: 'AGENT_BINARY_DIR',
  localGpuName: 'LOCAL_GPU_NAME', localGpuMemoryGb: 'LOCAL_GPU_MEMORY_GB', localPricePerHour: 'LOCAL_PRICE_PER_HOUR',
  marketSeed: 'MARKET_SEED', marketPriceDriftIntervalMs: 'MARKET_PRICE_DRIFT_INTERVAL_MS', marketVolatility: 'MARKET_VOLATILITY',
  meteringIntervalMs: 'METERING_INTERVAL_MS', capacityIntervalMs: 'CAPACITY_INTERVAL_MS', replicaLostGraceMs: 'REPLICA_LOST_GRACE_MS',
  replicaStartDeadlineMs: 'REPLICA_START_DEADLINE_MS', replicaStartBackoffBaseMs: 'REPLICA_START_BACKOFF_BASE_MS', replicaStartBackoffMaxMs: 'REPLICA_START_BACKOFF_MAX_MS',
  operatorToken: 'OPERATOR_TOKEN', autoscaleWindowMs: 'AUTOSCALE_WINDOW_MS',
  autoscaleScaleUpStabilizationMs: 'AUTOSCALE_SCALE_UP_STABILIZATION_MS', autoscaleScaleDownStabilizationMs: 'AUTOSCALE_SCALE_DOWN_STABILIZATION_MS',
  coldStartMaxWaitMs: 'COLD_START_MAX_WAIT_MS', coldStartEstimateMs: 'COLD_START_ESTIMATE_MS',
} as const;

/** The settings and their variables, for the server's `--help` (server-help.ts). */
export const CONTROL_PLANE_SETTINGS = { what: 'control plane', shape, names };

/**
 * The control plane's own settings. With each module's (storage, requests, webhooks, sharing)
 * they make the whole configuration, put together at the composition root: full-config.ts.
 */
export function loadControlPlaneConfig(env: NodeJS.ProcessEnv = process.env) {
  const config = loadEnv('control plane', shape, names, env);
  if (config.localEngine === 'llama-cpp' && !config.localModelPath) {
    throw new ConfigError('invalid control plane configuration: LOCAL_ENGINE=llama-cpp needs LOCAL_MODEL_PATH (the GGUF file to serve)');
  }
  if (config.replicaStartBackoffMaxMs < config.replicaStartBackoffBaseMs) {
    throw new ConfigError('invalid control plane configuration: REPLICA_START_BACKOFF_MAX_MS must be at least REPLICA_START_BACKOFF_BASE_MS');
  }
  return config;
}

/** The compiled agent; tests and `npm start` build it first. */
export const DEFAULT_AGENT_ENTRY = path.join(PROJECT_ROOT, 'dist/worker-agent/main.js');
/** Where `npm run build:agent` writes the agent's single binary and its `.sha256`. */
export const DEFAULT_AGENT_BINARY_DIR = path.join(PROJECT_ROOT, 'dist/bin');
