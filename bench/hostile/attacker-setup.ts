/**
 * The attacker's workspaces, keys and deployments, made by the benchmark (which has the
 * operator token) before the baseline, so that the baseline already carries whatever the
 * attacker's setup left running (its replica's agent). Each attack names what it needs.
 */
import { Client } from 'pg';
import { graphql } from './http-call';
import type { AttackTarget } from './attack';

export interface AttackerNeeds {
  /** Attacker workspaces: none (anonymous), the ordinary tenant's own (`tenant`: a second key of it), or new ones. */
  readonly workspaces: 'none' | 'tenant' | number;
  /** Credit of new workspaces: postpaid (no limit) or prepaid with 0. */
  readonly credit?: 'postpaid' | 'zero';
  /** A deployment per new workspace: `local` (an agent process on this host, waited for) or `external` (no process). */
  readonly deployment?: 'local' | 'external';
  /** Usage records (`--usage-records` of them) seeded into the attacker's workspace: a tenant with a history. */
  readonly seedUsage?: boolean;
}

export interface Server {
  readonly port: number;
  readonly tenantKey: string;
  readonly operatorToken: string;
  readonly databaseUrl: string;
  readonly modelId: string;
  readonly tenantChatPath: string;
}

/** What setting up did, for the report. */
export interface SetupNotes { [what: string]: string | number }

export async function setUpAttacker(server: Server, needs: AttackerNeeds, usageRecords: number): Promise<{ target: AttackTarget; notes: SetupNotes }> {
  const notes: SetupNotes = {};
  const base = { port: server.port, modelId: server.modelId, tenantChatPath: server.tenantChatPath };
  if (needs.workspaces === 'none') return { target: { ...base, keys: [], deployments: [] }, notes };
  if (needs.workspaces === 'tenant') {
    const data = await gql(server.port, server.tenantKey, 'mutation { createApiKey(input: {name: "bench-hostile attacker"}) { plaintext } }');
    notes.attacker = 'a second key of the ordinary tenant\'s workspace';
    return { target: { ...base, keys: [data.createApiKey.plaintext], deployments: [] }, notes };
  }
  const keys: string[] = [];
  const deployments: AttackTarget['deployments'] = [];
  const workspaceIds: string[] = [];
  for (let index = 0; index < needs.workspaces; index++) {
    const data = await gql(server.port, server.operatorToken, 'mutation($name: String!, $credit: Decimal) { createWorkspace(name: $name, creditBalance: $credit) { workspace { id } plaintext } }',
      { name: `bench-hostile attacker ${index + 1}`, credit: needs.credit === 'zero' ? '0' : null });
    keys.push(data.createWorkspace.plaintext);
    workspaceIds.push(data.createWorkspace.workspace.id);
    // A paying attacker that needs a replica (its agent's heartbeats feed the subscriptions) is
    // granted local capacity, as an operator grants a customer; the zero-credit one is not (its
    // attack is taking the host's processes). A server without the tenant budget has no such grant.
    if (needs.deployment === 'local' && needs.credit !== 'zero') await grantLocalCapacity(server, data.createWorkspace.workspace.id);
    deployments.push(needs.deployment ? await deploy(server, data.createWorkspace.plaintext, needs.deployment, notes) : null);
  }
  notes.attacker = `${needs.workspaces} workspace(s) of its own, ${needs.credit === 'zero' ? 'prepaid with 0 credit' : 'postpaid'}` +
    `${needs.deployment ? `, one ${needs.deployment} deployment each` : ''}`;
  if (needs.seedUsage) notes['usage records seeded'] = await seedUsage(server.databaseUrl, workspaceIds[0], deployments[0]?.id ?? 'seeded', usageRecords);
  return { target: { ...base, keys, deployments }, notes };
}

async function grantLocalCapacity(server: Server, workspaceId: string): Promise<void> {
  await gql(server.port, server.operatorToken, 'mutation($id: ID!) { setWorkspaceBudget(workspaceId: $id, budget: "local_replicas", scope: "workspace", value: 10) { budget } }', { id: workspaceId })
    .catch(() => undefined);
}

async function deploy(server: Server, key: string, provider: 'local' | 'external', notes: SetupNotes): Promise<{ id: string; slug: string } | null> {
  const answer = await graphql(server.port, key, 'mutation($input: CreateDeploymentInput!) { createDeployment(input: $input) { deployment { id slug } } }',
    { input: { modelId: server.modelId, priceCapPerHour: 1, minReplicas: 1, maxReplicas: 1, provider } }, { timeoutMs: 60_000 });
  if (answer.error) {
    // The fixed server may refuse an attacker its deployment: that is an answer, not a failure of the benchmark.
    notes['attacker deployment refused'] = `${answer.status} ${answer.error}`;
    return null;
  }
  const deployment = (JSON.parse(answer.text) as { data: { createDeployment: { deployment: { id: string; slug: string } } } }).data.createDeployment.deployment;
  if (provider === 'local') {
    const deadline = Date.now() + 120_000;
    for (;;) {
      const status = (await gql(server.port, key, 'query($id: ID!) { deployment(id: $id) { status } }', { id: deployment.id })).deployment.status;
      if (status === 'Running') break;
      if (Date.now() > deadline) throw new Error(`the attacker's local deployment is still ${status} after 120 s`);
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
  }
  return deployment;
}

async function gql(port: number, token: string, query: string, variables: Record<string, unknown> = {}): Promise<any> {
  const answer = await graphql(port, token, query, variables, { timeoutMs: 60_000 });
  if (answer.error) throw new Error(`${query.slice(0, 60)}…: ${answer.status} ${answer.text.slice(0, 300)}`);
  return (JSON.parse(answer.text) as { data: unknown }).data;
}

/** `count` usage records of the workspace spread over the last 30 days (one INSERT … SELECT). */
async function seedUsage(databaseUrl: string, workspaceId: string, deploymentId: string, count: number): Promise<string> {
  const client = new Client({ connectionString: databaseUrl });
  await client.connect();
  const startedAt = Date.now();
  try {
    await client.query(`
      INSERT INTO usage_records (workspace_id, api_key_id, deployment_id, replica_id, endpoint, status, stream, prompt_tokens, completion_tokens, total_tokens, latency_ms, created_at)
      SELECT $1, 'seeded-key-' || (n % 7), $2, NULL, 'chat.completions', 'succeeded', false, 100 + n % 900, 10 + n % 200, 110 + n % 900 + n % 200, 200, now() - (n % 2592000) * interval '1 second'
      FROM generate_series(1, $3::int) AS n`, [workspaceId, deploymentId, count]);
    await client.query('ANALYZE usage_records');
  } finally {
    await client.end();
  }
  return `${count} over the last 30 days, in ${((Date.now() - startedAt) / 1000).toFixed(1)} s`;
}
