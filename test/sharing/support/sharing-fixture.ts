import OpenAI from 'openai';
import { UNLIMITED } from '../../../control-plane/budgets/budget-kinds';
import { graphqlClient, OPERATOR_TOKEN } from '../../capacity/support/graphql-client';
import { startTestServer, waitFor, type TestServer, type TestServerOptions } from '../../support/test-server';

export const SHARED_MODEL = 'meta-llama/Llama-3.1-8B-Instruct';
export const SHARED_ID = `shared/${SHARED_MODEL}`;
/** The catalog's shared prices of SHARED_MODEL, per 1M tokens. */
export const PRICE_PER_MILLION = '0.18';

export interface SharingFixture {
  test: TestServer;
  /** GraphQL as `token` (a workspace key or the operator token). */
  graphql: ReturnType<typeof graphqlClient>;
  /** A workspace made through the operator API: its id and first key. */
  workspace(name: string, creditBalance?: string): Promise<{ id: string; apiKey: string }>;
  /** An OpenAI client on the shared endpoint. */
  guestClient(apiKey: string): OpenAI;
  deployment(id: string, apiKey: string): Promise<any>;
  /** Creates a deployment of SHARED_MODEL as `apiKey` and waits until its sharing state is `sharing`. */
  sharedDeployment(apiKey: string, options?: { minReplicas?: number }): Promise<{ id: string; baseUrl: string }>;
  waitForSharing(id: string, apiKey: string, sharing: string): Promise<void>;
}

/**
 * A server whose local agents run the CPU engine with 4 slots (1 kept for the owner: 3 guest
 * slots per replica) and per-request timing controls, with fast capacity, availability and
 * settlement loops.
 */
export async function startSharingFixture(options: TestServerOptions = {}): Promise<SharingFixture> {
  const test = await startTestServer({
    ...options,
    controlPlane: {
      capacityIntervalMs: 100, localMaxConcurrency: 4, operatorToken: OPERATOR_TOKEN, ...options.controlPlane,
      localAgentEnv: { WORKER_CPU_TEST_CONTROLS: 'true', ...options.controlPlane?.localAgentEnv },
      // Settlements written every 50 ms and idle credit leases given back after 300 ms: tests see the ledger and the holds settle quickly.
      sharing: { availabilityIntervalMs: 100, settleIntervalMs: 50, creditLeaseIdleMs: 300, ...options.controlPlane?.sharing },
    },
  });
  const graphql = graphqlClient(test.url, OPERATOR_TOKEN);
  const deployment = async (id: string, apiKey: string) => (await graphql(`query($id: ID!) { deployment(id: $id) {
    id status sharing shareIdleCapacity baseUrl replicas { id status statusReason } } }`, { id }, apiKey)).data.deployment;
  const waitForSharing = (id: string, apiKey: string, sharing: string) =>
    waitFor(async () => (await deployment(id, apiKey)).sharing === sharing, 30_000, `sharing ${sharing}`);
  return {
    test, graphql, deployment, waitForSharing,
    async workspace(name, creditBalance) {
      const result = await graphql(`mutation($name: String!, $credit: Decimal) { createWorkspace(name: $name, creditBalance: $credit) { workspace { id } plaintext } }`,
        { name, credit: creditBalance ?? null });
      if (result.errors) throw new Error(JSON.stringify(result.errors));
      const id = result.data.createWorkspace.workspace.id;
      // The operator grants it this host's local capacity (owners' shared deployments run there).
      await test.server.controlPlane.workspaceBudgets.set(id, 'local_replicas', 'workspace', UNLIMITED);
      return { id, apiKey: result.data.createWorkspace.plaintext };
    },
    guestClient: (apiKey) => new OpenAI({ baseURL: `${test.url}/shared/v1`, apiKey, maxRetries: 0 }),
    async sharedDeployment(apiKey, { minReplicas = 1 } = {}) {
      const created = await graphql(`mutation($min: Int!) { createDeployment(input: {modelId: "${SHARED_MODEL}", priceCapPerHour: 1, minReplicas: $min, maxReplicas: $min, shareIdleCapacity: true}) {
        deployment { id baseUrl sharing } } }`, { min: minReplicas }, apiKey);
      if (created.errors) throw new Error(JSON.stringify(created.errors));
      const { id, baseUrl } = created.data.createDeployment.deployment;
      await waitForSharing(id, apiKey, 'shared');
      return { id, baseUrl };
    },
  };
}

/** A chat body the CPU engine answers slowly (its per-request test controls). */
export function slowChat(ttftMs: number, maxTokens = 4, tokensPerSecond = 0) {
  return {
    model: SHARED_ID, messages: [{ role: 'user' as const, content: 'slow please' }], max_tokens: maxTokens,
    cpu_engine: { ttft_ms: ttftMs, tokens_per_second: tokensPerSecond },
  };
}
