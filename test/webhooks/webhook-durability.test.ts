import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { DEFAULT_AGENT_ENTRY } from '../../control-plane/config/control-plane-config';
import { createTestDatabase, dropTestDatabase } from '../support/test-database';
import { startTestServer, waitFor, type TestServer } from '../support/test-server';
import { startReceiver } from './support/receiver';

const SERVER_ENTRY = path.join(path.dirname(DEFAULT_AGENT_ENTRY), '../gateway/main.js');

async function freePort(): Promise<number> {
  return await new Promise((resolve) => {
    const server = net.createServer().listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

/** Delivery survives the death of the server that was sending it, and follows the real 2 s / 4 s spacing of docs/api-contract.md#webhooks. */
describe('webhook durability', () => {
  let receiver: Awaited<ReturnType<typeof startReceiver>>;

  beforeAll(async () => {
    receiver = await startReceiver();
  });

  afterAll(async () => {
    await receiver?.close();
  });

  it('a server killed mid-delivery: the next server delivers the same event after the claim lapses (at-least-once)', async () => {
    const databaseUrl = await createTestDatabase();
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'webhook-kill-'));
    let killed: ChildProcess | null = null;
    let restarted: TestServer | null = null;
    try {
      const port = await freePort();
      killed = spawn(process.execPath, [SERVER_ENTRY], {
        env: {
          PATH: process.env.PATH, DATABASE_URL: databaseUrl, DATA_DIR: dataDir, PORT: String(port), HOST: '127.0.0.1',
          GRPC_PORT: '0', GRPC_HOST: '127.0.0.1', LOCAL_AGENTS: 'false', LOG_LEVEL: 'silent',
          WEBHOOK_ALLOW_INSECURE_LOOPBACK: 'true', WEBHOOK_ATTEMPT_TIMEOUT_MS: '1000',
        },
        stdio: ['ignore', 'pipe', 'ignore'],
      });
      let banner = '';
      killed.stdout!.on('data', (part) => (banner += part));
      await waitFor(() => /API key:\s+mk-/.test(banner), 30_000, 'the first server');
      const key = /API key:\s+(mk-\S+)/.exec(banner)![1];
      const graphql = async (url: string, query: string, variables: Record<string, unknown> = {}) => (await (await fetch(`${url}/graphql`, {
        method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: JSON.stringify({ query, variables }),
      })).json()) as { data: any };
      const firstUrl = `http://127.0.0.1:${port}`;
      const endpoint = (await graphql(firstUrl, 'mutation($url: String!) { createWebhookEndpoint(input: {url: $url}) { id } }', { url: `${receiver.base}/hang` })).data.createWebhookEndpoint;
      const delivery = (await graphql(firstUrl, 'mutation($id: ID!) { sendTestWebhook(endpointId: $id) { id } }', { id: endpoint.id })).data.sendTestWebhook;
      await waitFor(() => receiver.at('/hang').length === 1, 10_000, 'the first attempt to reach the receiver');
      killed.kill('SIGKILL');
      await new Promise((resolve) => killed!.once('exit', resolve));

      // The receiver now answers; the next server finds the delivery claimed by a dead server.
      receiver.set('/hang', () => ({ status: 200 }));
      restarted = await startTestServer({ databaseUrl, dataDir, controlPlane: { localAgents: false, webhooks: { allowInsecureLoopback: true, attemptTimeoutMs: 1_000 } } });
      await waitFor(() => receiver.at('/hang').length === 2, 15_000, 'the redelivery');
      const [first, second] = receiver.at('/hang').map((request) => JSON.parse(request.rawBody.toString('utf8')));
      expect(second.id).toBe(first.id);
      const row = await restarted.server.controlPlane.webhooks.service.delivery((await restarted.server.controlPlane.workspaces.first())!.id, delivery.id);
      await waitFor(async () => (await restarted!.server.controlPlane.webhooks.service.delivery(row.workspaceId, delivery.id)).status === 'succeeded', 5_000, 'the delivery to be recorded');
    } finally {
      if (killed && killed.exitCode === null && killed.signalCode === null) killed.kill('SIGKILL');
      await restarted?.stop();
      await dropTestDatabase(databaseUrl);
      fs.rmSync(dataDir, { recursive: true, force: true });
    }
  });

  it('retries at the contract\'s real spacing: 2 s, then 4 s', async () => {
    const test = await startTestServer({ controlPlane: { localAgents: false, webhooks: { allowInsecureLoopback: true } } });
    try {
      const workspace = await test.createWorkspace();
      const webhooks = test.server.controlPlane.webhooks.service;
      const endpoint = await webhooks.endpoints.create(workspace.workspaceId, `${receiver.base}/flaky/2/real`);
      await webhooks.sendTest(workspace.workspaceId, endpoint.id);
      await waitFor(() => receiver.at('/flaky/2/real').length === 3, 15_000, 'three attempts');
      const [first, second, third] = receiver.at('/flaky/2/real').map((request) => request.receivedAt);
      expect(second - first).toBeGreaterThanOrEqual(1_950);
      expect(second - first).toBeLessThan(2_600);
      expect(third - second).toBeGreaterThanOrEqual(3_950);
      expect(third - second).toBeLessThan(4_600);
    } finally {
      await test.stop();
    }
  }, 30_000);
});
