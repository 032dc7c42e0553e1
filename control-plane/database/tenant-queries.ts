import { AsyncLocalStorage } from 'node:async_hooks';
import { DataSource, type DataSourceOptions, type QueryRunner, type ReplicationMode } from 'typeorm';

interface TenantScope {
  /** False once the tenant's operation ended: work it started and left running is the server's own from then on. */
  open: boolean;
}

/**
 * Which queries a tenant's request causes: those run inside `run` (a GraphQL operation, a
 * subscription event's rendering, a REST list). They go to a pool of their own whose
 * connections carry a PostgreSQL `statement_timeout`, so one slow query (an aggregate over a
 * year of a large workspace, a read queued behind a lock) is cancelled instead of holding a
 * connection; migrations, the control plane's loops and the request path keep the main pool,
 * without a timeout and out of tenants' reach. One 450-alias `usage` query ran 5.4 s and four
 * in parallel held all 10 connections of the one pool (issue 33).
 *
 * The scope follows the operation's async calls (AsyncLocalStorage) and closes when it ends,
 * so a timer or loop a resolver happened to start goes back to the main pool afterwards.
 */
export class TenantQueries {
  private readonly scopes = new AsyncLocalStorage<TenantScope>();

  /** `statementTimeoutMs` 0: tenant queries share the main pool, without a timeout. */
  constructor(readonly statementTimeoutMs: number) {}

  async run<T>(work: () => Promise<T>): Promise<T> {
    if (this.active) return await work();
    const scope: TenantScope = { open: true };
    try {
      return await this.scopes.run(scope, work);
    } finally {
      scope.open = false;
    }
  }

  /** True inside `run` while its operation lasts. */
  get active(): boolean {
    return this.scopes.getStore()?.open === true;
  }
}

/**
 * A DataSource that sends the queries of a tenant scope to the tenant pool: TypeORM's
 * replication, with the "replica" the same database reached through connections that carry
 * `statement_timeout`. Every query path of TypeORM (`query`, repositories, query builders,
 * transactions) takes its connection through `createQueryRunner`, which chooses by the scope
 * alone, never by TypeORM's read/write guess.
 */
export class TenantAwareDataSource extends DataSource {
  constructor(options: DataSourceOptions, readonly tenantQueries: TenantQueries) {
    super(options);
  }

  override createQueryRunner(_mode?: ReplicationMode): QueryRunner {
    return super.createQueryRunner(this.tenantQueries.active ? 'slave' : 'master');
  }
}

/** The replication options of a tenant pool on `url` whose statements stop after `statementTimeoutMs`. */
export function tenantReplication(url: string, statementTimeoutMs: number) {
  const tenantUrl = new URL(url);
  // node-postgres sends `statement_timeout` as a startup parameter: set for the connection's whole life, no query per use.
  tenantUrl.searchParams.set('statement_timeout', String(statementTimeoutMs));
  return { master: { url }, slaves: [{ url: tenantUrl.toString() }], defaultMode: 'master' as const };
}

/** A statement PostgreSQL cancelled for running past `statement_timeout` (SQLSTATE 57014 with that reason). */
export function isStatementTimeout(error: unknown): boolean {
  let current = error as { code?: unknown; message?: unknown; driverError?: unknown; cause?: unknown; originalError?: unknown } | undefined;
  for (let depth = 0; depth < 6 && current && typeof current === 'object'; depth++) {
    if (current.code === '57014' && typeof current.message === 'string' && current.message.includes('statement timeout')) return true;
    current = (current.driverError ?? current.cause ?? current.originalError) as typeof current;
  }
  return false;
}
