/**
 * A GraphQL operation weighs what it costs the database (issue 33): a query of 450 `usage`
 * aliases stayed within the old limits and ran 5.4 s, four in parallel held the whole
 * 10-connection pool and other tenants' createApiKey waited 10 s; a key ran any number of
 * operations at once, and nothing had a statement_timeout.
 *
 * Slowness is made with a lock: a test transaction holds a table, so the queries that read it
 * wait in PostgreSQL (holding their connections) until it commits, as slow queries would.
 */
import { Client } from 'pg';
import { startTestServer, waitFor, type TestServer, type TestWorkspace } from '../support/test-server';
import { GraphQLSocket } from './support/graphql-socket';
import { call, graphql, type GraphQLAnswer } from './support/security-client';

const RANGE = 'from: "2026-01-01T00:00:00Z", to: "2026-06-01T00:00:00Z"';
const usageAliases = (count: number) => `{ ${Array.from({ length: count }, (_, index) => `u${index}: usage(${RANGE}) { key requests }`).join(' ')} }`;

/** Holds `table` in a transaction of its own until `release`: queries that read it wait in PostgreSQL. */
async function lockTable(databaseUrl: string, table: string): Promise<{ release(): Promise<void> }> {
  const client = new Client({ connectionString: databaseUrl });
  await client.connect();
  await client.query('BEGIN');
  await client.query(`LOCK TABLE ${table} IN ACCESS EXCLUSIVE MODE`);
  return {
    async release() {
      await client.query('COMMIT');
      await client.end();
    },
  };
}

/** How many statements reading `table` wait on a lock now. */
async function waitingOn(test: TestServer, table: string): Promise<number> {
  const [row] = await test.server.controlPlane.dataSource.query(
    `SELECT count(*)::int AS count FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE $1`, [`%FROM ${table} %`]);
  return row.count;
}

describe('GraphQL operations weigh what they cost the database', () => {
  let test: TestServer;
  let attacker: TestWorkspace;
  let victim: TestWorkspace;
  const as = (key: string) => (query: string, variables: Record<string, unknown> = {}) => graphql(test.url, `Bearer ${key}`, query, variables);
  const held = (name: 'graphql_operations' | 'graphql_cost', scope: 'key' | 'workspace' | 'server', holder = {}) => test.server.controlPlane.budget.used(name, scope, holder);
  const newKey = async (workspace: TestWorkspace) => (await test.server.controlPlane.apiKeys.create(workspace.workspaceId, 'another key')).plaintext;

  beforeAll(async () => {
    // Long enough that the locked queries of these tests wait instead of timing out.
    test = await startTestServer({ controlPlane: { tenantStatementTimeoutMs: 60_000 } });
    attacker = await test.createWorkspace();
    victim = await test.createWorkspace();
  });
  afterEach(async () => {
    await waitFor(() => held('graphql_operations', 'server') === 0 && held('graphql_cost', 'server') === 0, 10_000, 'every operation\'s hold given back');
  });
  afterAll(async () => {
    await test?.stop();
  });

  it('450 `usage` aliases are refused before they run, QUERY_TOO_COMPLEX naming the database cost, over HTTP and WebSocket', async () => {
    const answer = await as(attacker.apiKey)(usageAliases(450));
    expect(answer.status).toBe(400);
    expect(answer.body.data).toBeUndefined();
    expect(answer.body.errors?.[0].extensions.code).toBe('QUERY_TOO_COMPLEX');
    expect(answer.body.errors?.[0].message).toMatch(/database cost 11250 is over the limit of 200 per operation \(usage, costs and sharingEarnings weigh 25 each/);
    const socket = await GraphQLSocket.open(test.url, `Bearer ${attacker.apiKey}`);
    try {
      const overSocket = await socket.run(usageAliases(450)) as Array<{ message: string; extensions: { code: string } }>;
      expect(overSocket[0].extensions.code).toBe('QUERY_TOO_COMPLEX');
    } finally {
      socket.terminate();
    }
    // Within the limit (8 × 25) it runs.
    const allowed = await as(attacker.apiKey)(usageAliases(8));
    expect(allowed.body.errors).toBeUndefined();
    expect(Object.keys(allowed.body.data)).toHaveLength(8);
  });

  it('four heavy operations in flight: one workspace gets its share, each runs two queries at a time, and another tenant\'s createApiKey and creditBalance are served meanwhile', async () => {
    const keys = [attacker.apiKey, ...await Promise.all([newKey(attacker), newKey(attacker), newKey(attacker)])];
    const lock = await lockTable(test.databaseUrl, 'usage_records');
    let heavy: Promise<GraphQLAnswer>[] = [];
    try {
      heavy = keys.map((key) => as(key)(usageAliases(8)));
      // Two are admitted (the workspace's 400 of graphql_cost); the other two are refused at once.
      const settled: GraphQLAnswer[] = [];
      heavy.forEach((answer) => void answer.then((value) => settled.push(value)));
      await waitFor(() => settled.length === 2, 10_000, 'two refusals');
      for (const refused of settled) {
        expect(refused.status).toBe(429);
        expect(refused.body.errors?.[0].extensions.code).toBe('RATE_LIMITED');
        expect(refused.body.errors?.[0].message).toMatch(/budget 'graphql_cost' is used up for this workspace: 400 of at most 400/);
      }
      // Each admitted operation has two of its eight queries waiting in PostgreSQL, not eight.
      await waitFor(async () => (await waitingOn(test, 'usage_records')) === 4, 10_000, 'four usage queries waiting on the lock');
      expect(held('graphql_cost', 'workspace', { workspaceId: attacker.workspaceId })).toBe(400);

      const created = await as(victim.apiKey)('mutation { createApiKey(input: { name: "while they wait" }) { plaintext } }');
      expect(created.body.errors).toBeUndefined();
      expect(created.body.data.createApiKey.plaintext).toMatch(/^mk-/);
      const balance = await as(victim.apiKey)('{ creditBalance }');
      expect(balance.body).toEqual({ data: { creditBalance: null } });
      // Still waiting: the victim was served while they held what they were given.
      expect(settled).toHaveLength(2);
      expect(await waitingOn(test, 'usage_records')).toBe(4);
    } finally {
      await lock.release();
    }
    const answers = await Promise.all(heavy);
    expect(answers.filter((answer) => answer.body.data && !answer.body.errors)).toHaveLength(2);
  });

  it('the 9th operation of a key running at once is RATE_LIMITED (HTTP and WebSocket) while another key is served', async () => {
    const lock = await lockTable(test.databaseUrl, 'usage_records');
    let running: Promise<GraphQLAnswer>[] = [];
    const socket = await GraphQLSocket.open(test.url, `Bearer ${attacker.apiKey}`);
    try {
      running = Array.from({ length: 8 }, () => as(attacker.apiKey)(`{ usage(${RANGE}) { key } }`));
      await waitFor(() => held('graphql_operations', 'key', { keyId: attacker.apiKeyId }) === 8, 10_000, 'eight operations running');
      const ninth = await as(attacker.apiKey)('{ apiKeys { id } }');
      expect(ninth.status).toBe(429);
      expect(ninth.body.errors?.[0].extensions.code).toBe('RATE_LIMITED');
      expect(ninth.body.errors?.[0].message).toMatch(/budget 'graphql_operations' is used up for this API key: 8 of at most 8/);
      // Refused before it is parsed: graphql-ws's `error` message, a list of errors.
      const overSocket = await socket.run('{ apiKeys { id } }') as Array<{ message: string; extensions: { code: string } }>;
      expect(overSocket[0].extensions.code).toBe('RATE_LIMITED');
      expect(overSocket[0].message).toMatch(/graphql_operations/);

      const other = await as(victim.apiKey)('{ apiKeys { id } }');
      expect(other.body.errors).toBeUndefined();
      expect(other.body.data.apiKeys.length).toBeGreaterThan(0);
    } finally {
      socket.terminate();
      await lock.release();
    }
    for (const answer of await Promise.all(running)) expect(answer.body.errors).toBeUndefined();
    expect(await socket.closed).toBeDefined();
  });
});

describe('tenant queries run with a statement timeout', () => {
  let test: TestServer;
  let workspace: TestWorkspace;
  let deployment: { slug: string };

  beforeAll(async () => {
    // 1 s, not less: every tenant query of this file runs under it, and a loaded CI machine's
    // PostgreSQL can take a few hundred ms over an unlocked one.
    test = await startTestServer({ controlPlane: { tenantStatementTimeoutMs: 1_000 } });
    workspace = await test.createWorkspace();
    deployment = await test.createDeployment(workspace, { provider: 'external' });
  });
  afterAll(async () => {
    await test?.stop();
  });

  it('a GraphQL read past it is cancelled and answered UNAVAILABLE, never a 500; the control plane\'s own query on the same table waits and succeeds', async () => {
    const lock = await lockTable(test.databaseUrl, 'usage_records');
    let own: Promise<unknown> | null = null;
    try {
      own = test.server.controlPlane.dataSource.query('SELECT count(*)::int AS count FROM usage_records');
      const answer = await graphql(test.url, `Bearer ${workspace.apiKey}`, `{ usage(${RANGE}) { key } }`);
      expect(answer.body.errors?.[0].extensions.code).toBe('UNAVAILABLE');
      expect(answer.body.errors?.[0].message).toMatch(/TENANT_STATEMENT_TIMEOUT_MS/);
      expect(answer.text).not.toMatch(/internal error|canceling statement/);
      // The control plane's own query waits on the lock past the tenant timeout, then succeeds.
      await new Promise((resolve) => setTimeout(resolve, 1_200));
    } finally {
      await lock.release();
    }
    expect(await own).toEqual([{ count: 0 }]);
  });

  it('a REST list past it is 503 service_unavailable with Retry-After', async () => {
    const lock = await lockTable(test.databaseUrl, 'batches');
    try {
      const answer = await call('GET', `${test.url}/d/${deployment.slug}/v1/batches`, `Bearer ${workspace.apiKey}`);
      expect(answer.status).toBe(503);
      expect(answer.json.error).toMatchObject({ code: 'service_unavailable', message: expect.stringMatching(/TENANT_STATEMENT_TIMEOUT_MS/) });
      expect(answer.headers.get('retry-after')).toBe('5');
    } finally {
      await lock.release();
    }
    const listed = await call('GET', `${test.url}/d/${deployment.slug}/v1/batches`, `Bearer ${workspace.apiKey}`);
    expect(listed.status).toBe(200);
  });
});
