import { z } from 'zod';
import { boolField, intField, loadEnv } from '../control-plane/api/startup';

const shape = {
  /** Interface the HTTP server binds. @default 127.0.0.1 */
  host: z.string().default('127.0.0.1'),
  /** HTTP port for /v1, /graphql and subscriptions; 0 picks a free one. @default 8080 */
  port: intField(0, 65535).default(8080),
  /** Base of the URLs printed and returned to users; defaults to http://localhost:<port>. */
  publicUrl: z.string().url().optional(),
  /** Largest accepted request body. @default 4194304 (4 MiB) */
  maxBodyBytes: intField(1024).default(4 * 1024 * 1024),
  /** Largest `/graphql` body (and WebSocket message) of a caller with a key or the operator token. @default 262144 (256 KiB) */
  graphqlMaxBodyBytes: intField(1024).default(256 * 1024),
  /**
   * Largest `/graphql` body without a key, and largest WebSocket message before the connection
   * is accepted: only sign-in is served without a key. @default 4096
   */
  graphqlAnonymousMaxBodyBytes: intField(512).default(4096),
  /** Most lexical tokens in one GraphQL document; parsing stops there. @default 10000 */
  graphqlMaxTokens: intField(100).default(10_000),
  /** graphql-ws keep-alive: ping interval; a socket silent for two intervals is dropped. 0 disables. @default 12000 */
  graphqlKeepAliveMs: intField(0).default(12_000),
  /** A WebSocket that sends no `connection_init` within this is closed (4408). @default 3000 */
  graphqlConnectionInitTimeoutMs: intField(1).default(3_000),
  /**
   * Largest estimated database cost of one GraphQL operation: each field its weight (an
   * aggregate such as `usage` 25, a list 2, a lookup 1), every alias counted; more is refused
   * with QUERY_TOO_COMPLEX before it runs. @default 200
   */
  graphqlMaxDatabaseCost: intField(1).default(200),
  /** How many of one GraphQL operation's database reads run at once; the rest wait their turn. @default 2 */
  graphqlDatabaseQueriesPerOperation: intField(1, 64).default(2),
  /** Chat/completion budget per request (docs/api-contract.md: 120 s). @default 120000 */
  requestTimeoutMs: intField(1).default(120_000),
  /**
   * A streamed or written-out response whose client takes no byte of it for this long is
   * abandoned: the socket is closed and the job canceled (`client_stalled`), metered like a
   * disconnect. @default 30000
   */
  streamStallTimeoutMs: intField(100).default(30_000),
  /**
   * How far a streamed job may run ahead of its client: the chunk bytes its agent may send
   * that the client has not taken yet (the job's stream window). Also bounds what the gateway
   * buffers per request (twice this at most). @default 1048576 (1 MiB)
   */
  streamBufferBytes: intField(64 * 1024, 64 * 1024 * 1024).default(1024 * 1024),
  /**
   * A client must send a request's headers within this (Node's headersTimeout; a silent or
   * half-open connection is answered 408 and closed). @default 10000
   */
  headersTimeoutMs: intField(1_000).default(10_000),
  /**
   * After `bodyGraceMs`, a request body must have arrived at this average rate at least, or its
   * connection is cut (a body trickled a byte at a time held memory and a connection for
   * minutes). 0 disables. @default 4096
   */
  minBodyBytesPerSecond: intField(0).default(4_096),
  /** How long a body may take before its rate counts. @default 10000 */
  bodyGraceMs: intField(0).default(10_000),
  /**
   * Bodies up to this size are not counted in the tenant budget's `memory` (every larger one is,
   * by the bytes received, per key, workspace and server). @default 65536
   */
  bodyMemoryThresholdBytes: intField(0).default(64 * 1024),
  /** Log level of the server (pino). @default info */
  logLevel: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  /**
   * Bearer token `GET /metrics` requires; unset, only clients on this host (loopback, not
   * proxied) may scrape. At least 16 characters.
   */
  metricsToken: z.string().min(16).optional(),
  /** On shutdown, connections still open this long after the server stopped accepting are cut. @default 5000 */
  shutdownGraceMs: intField(0).default(5_000),
  /**
   * The whole shutdown's deadline (SIGTERM or SIGINT): agents drained, HTTP closed, usage
   * flushed, the database stopped; past it the server kills its agents and exits 1. @default 60000
   */
  shutdownTimeoutMs: intField(100).default(60_000),
  /** One `info` line per request (id, deployment, status, tokens, timings); `false` keeps only warnings and errors. @default true */
  logRequests: boolField().default(true),
  /** Folder of the built web console served at /console. @default dist/console (written by npm run build) */
  consoleDir: z.string().min(1).optional(),
};

const names = {
  host: 'HOST', port: 'PORT', publicUrl: 'PUBLIC_URL', maxBodyBytes: 'MAX_BODY_BYTES',
  requestTimeoutMs: 'REQUEST_TIMEOUT_MS', streamStallTimeoutMs: 'STREAM_STALL_TIMEOUT_MS', streamBufferBytes: 'STREAM_BUFFER_BYTES',
  graphqlMaxBodyBytes: 'GRAPHQL_MAX_BODY_BYTES', graphqlAnonymousMaxBodyBytes: 'GRAPHQL_ANONYMOUS_MAX_BODY_BYTES', graphqlMaxTokens: 'GRAPHQL_MAX_TOKENS',
  graphqlMaxDatabaseCost: 'GRAPHQL_MAX_DATABASE_COST', graphqlDatabaseQueriesPerOperation: 'GRAPHQL_DATABASE_QUERIES_PER_OPERATION',
  graphqlKeepAliveMs: 'GRAPHQL_KEEPALIVE_MS', headersTimeoutMs: 'HEADERS_TIMEOUT_MS', minBodyBytesPerSecond: 'MIN_BODY_BYTES_PER_SECOND',
  bodyGraceMs: 'BODY_GRACE_MS', bodyMemoryThresholdBytes: 'BODY_MEMORY_THRESHOLD_BYTES', graphqlConnectionInitTimeoutMs: 'GRAPHQL_CONNECTION_INIT_TIMEOUT_MS', logLevel: 'LOG_LEVEL', metricsToken: 'METRICS_TOKEN', consoleDir: 'CONSOLE_DIR', shutdownGraceMs: 'SHUTDOWN_GRACE_MS',
  shutdownTimeoutMs: 'SHUTDOWN_TIMEOUT_MS', logRequests: 'LOG_REQUESTS',
} as const;

export type GatewayConfig = ReturnType<typeof loadGatewayConfig>;

/** The settings and their variables, for the server's `--help` (server-help.ts). */
export const GATEWAY_SETTINGS = { what: 'gateway', shape, names };

export function loadGatewayConfig(env: NodeJS.ProcessEnv = process.env) {
  return loadEnv('gateway', shape, names, env);
}
