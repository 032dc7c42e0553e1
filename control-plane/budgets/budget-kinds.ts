/**
 * Every resource a tenant can make the server hold, named once. A surface that holds one asks
 * the tenant budget first (tenant-budget.ts for what is held while something runs, stored-quota.ts
 * for what stays stored) and gives it back on every path it ends by. Limits used to be written
 * per surface, so each new surface shipped open: uploads were bounded, JSON bodies, downloads,
 * subscriptions and local agent processes were not (docs/tenant-budget.md).
 */
export const BUDGET_NAMES = [
  'connections', 'requests', 'memory', 'sockets', 'subscriptions', 'graphql_operations', 'graphql_cost',
  'stored_bytes', 'stored_files', 'active_batches', 'deployments', 'local_replicas',
] as const;
export type BudgetName = (typeof BUDGET_NAMES)[number];

/**
 * Who a limit applies to. `address`: one client IP's connections before any key is known;
 * `socket`: one graphql-ws connection; `server`: this server process (or, for local replicas,
 * this host).
 */
export type BudgetScope = 'key' | 'workspace' | 'server' | 'address' | 'socket';

/** The scopes an operator may set per workspace (GraphQL `setWorkspaceBudget`). */
export const OVERRIDABLE_SCOPES = ['key', 'workspace'] as const;
export type OverridableScope = (typeof OVERRIDABLE_SCOPES)[number];

export interface ScopeLimit {
  /** The environment variable that sets the default. */
  readonly env: string;
  readonly default: number;
}

export interface BudgetDefinition {
  /** What one unit is, in a sentence: "requests in flight". */
  readonly counts: string;
  readonly unit: 'count' | 'bytes';
  /**
   * `held`: counted in this server's memory while the thing lasts, released when it ends (each
   * server holds its own: what it protects is that server's memory, sockets and event loop).
   * `stored`: counted from the database when something is added, the same on every server.
   */
  readonly kind: 'held' | 'stored';
  readonly limits: Readonly<Partial<Record<BudgetScope, ScopeLimit>>>;
}

const MIB = 1024 * 1024;
const GIB = 1024 * MIB;

/** A limit that does not bind: what the first-run `dev` workspace gets for local replicas. */
export const UNLIMITED = 2_147_483_647;

/**
 * The defaults, chosen to be far above what one honest tenant does on one server and far below
 * what takes the server down (the measurements behind each are in docs/tenant-budget.md).
 */
export const BUDGETS: Readonly<Record<BudgetName, BudgetDefinition>> = {
  connections: {
    counts: 'open connections', unit: 'count', kind: 'held',
    limits: {
      // Below the process's file descriptors (the database, agents and files need some too): see connection-budget.ts.
      server: { env: 'MAX_CONNECTIONS', default: 10_000 },
      address: { env: 'MAX_ANONYMOUS_CONNECTIONS_PER_ADDRESS', default: 256 },
    },
  },
  requests: {
    counts: 'requests in flight', unit: 'count', kind: 'held',
    limits: {
      key: { env: 'REQUESTS_IN_FLIGHT_PER_KEY', default: 512 },
      workspace: { env: 'REQUESTS_IN_FLIGHT_PER_WORKSPACE', default: 1_024 },
      server: { env: 'REQUESTS_IN_FLIGHT_PER_SERVER', default: 8_192 },
    },
  },
  memory: {
    counts: 'bytes of request and response data held in memory', unit: 'bytes', kind: 'held',
    limits: {
      key: { env: 'MEMORY_PER_KEY_BYTES', default: 256 * MIB },
      workspace: { env: 'MEMORY_PER_WORKSPACE_BYTES', default: 256 * MIB },
      server: { env: 'MEMORY_BUDGET_BYTES', default: 512 * MIB },
    },
  },
  // The GraphQL budgets have a workspace scope as well as a key's: a workspace mints keys at will
  // (createApiKey), so per key alone one tenant could take the server's whole share.
  sockets: {
    counts: 'open graphql-ws connections', unit: 'count', kind: 'held',
    limits: {
      key: { env: 'GRAPHQL_SOCKETS_PER_KEY', default: 64 },
      workspace: { env: 'GRAPHQL_SOCKETS_PER_WORKSPACE', default: 128 },
      server: { env: 'GRAPHQL_SOCKETS_PER_SERVER', default: 5_000 },
    },
  },
  subscriptions: {
    counts: 'active subscriptions', unit: 'count', kind: 'held',
    limits: {
      socket: { env: 'GRAPHQL_SUBSCRIPTIONS_PER_SOCKET', default: 100 },
      key: { env: 'GRAPHQL_SUBSCRIPTIONS_PER_KEY', default: 500 },
      workspace: { env: 'GRAPHQL_SUBSCRIPTIONS_PER_WORKSPACE', default: 1_000 },
      // An event is rendered once per distinct operation and written to each of its subscribers
      // (gateway/graphql/subscription-hub.ts): one event to 20,000 subscribers of one deployment
      // is measured in docs/tenant-budget.md.
      server: { env: 'GRAPHQL_SUBSCRIPTIONS_PER_SERVER', default: 20_000 },
    },
  },
  graphql_operations: {
    counts: 'GraphQL queries and mutations running at once', unit: 'count', kind: 'held',
    limits: {
      key: { env: 'GRAPHQL_OPERATIONS_PER_KEY', default: 8 },
      workspace: { env: 'GRAPHQL_OPERATIONS_PER_WORKSPACE', default: 16 },
      server: { env: 'GRAPHQL_OPERATIONS_PER_SERVER', default: 256 },
    },
  },
  graphql_cost: {
    counts: 'estimated database cost of the GraphQL operations running at once', unit: 'count', kind: 'held',
    limits: {
      // In the weights of gateway/graphql/database-cost.ts (about a millisecond of database time
      // each: `usage` 25); one operation may ask for at most GRAPHQL_MAX_DATABASE_COST (200).
      key: { env: 'GRAPHQL_DATABASE_COST_PER_KEY', default: 200 },
      workspace: { env: 'GRAPHQL_DATABASE_COST_PER_WORKSPACE', default: 400 },
      // Five workspaces at their share before the server refuses anyone; what is admitted waits
      // at most this much work ahead of it on the tenant pool's 10 connections.
      server: { env: 'GRAPHQL_DATABASE_COST_PER_SERVER', default: 2_000 },
    },
  },
  stored_bytes: {
    counts: 'bytes of stored files', unit: 'bytes', kind: 'stored',
    limits: { workspace: { env: 'STORED_BYTES_PER_WORKSPACE', default: 10 * GIB } },
  },
  stored_files: {
    counts: 'stored files', unit: 'count', kind: 'stored',
    limits: { workspace: { env: 'STORED_FILES_PER_WORKSPACE', default: 1_000 } },
  },
  active_batches: {
    counts: 'batches not yet ended', unit: 'count', kind: 'stored',
    limits: { workspace: { env: 'ACTIVE_BATCHES_PER_WORKSPACE', default: 20 } },
  },
  deployments: {
    counts: 'deployments', unit: 'count', kind: 'stored',
    limits: { workspace: { env: 'DEPLOYMENTS_PER_WORKSPACE', default: 100 } },
  },
  local_replicas: {
    counts: 'replicas on this host\'s local capacity', unit: 'count', kind: 'stored',
    limits: {
      // 0: a workspace uses the host's own processes only when the operator allows it.
      workspace: { env: 'LOCAL_REPLICAS_PER_WORKSPACE', default: 0 },
      server: { env: 'LOCAL_REPLICAS', default: 32 },
    },
  },
};

/** The scopes a budget is held in, in the order they are checked (the narrowest first). */
export const SCOPE_ORDER: readonly BudgetScope[] = ['socket', 'address', 'key', 'workspace', 'server'];

export function isBudgetName(value: unknown): value is BudgetName {
  return typeof value === 'string' && (BUDGET_NAMES as readonly string[]).includes(value);
}
