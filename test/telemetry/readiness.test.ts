import net from 'node:net';
import os from 'node:os';
import { Client } from 'pg';
import pino from 'pino';
import { controlPlaneProbes } from '../../control-plane/telemetry/readiness-probes';
import { Readiness } from '../../gateway/http/readiness.route';
import { startTestServer, startWithDeployment, waitFor, serverForSuite, type TestServer } from '../support/test-server';

/** Turns new connections to one test database away and ends the open ones, until restored. */
async function setDatabaseReachable(databaseUrl: string, reachable: boolean): Promise<void> {
  const name = new URL(databaseUrl).pathname.slice(1);
  const admin = new Client({ connectionString: process.env.TEST_PG_ADMIN_URL });
  await admin.connect();
  try {
    // ALLOW_CONNECTIONS binds superusers too (a CONNECTION LIMIT would not).
    await admin.query(`ALTER DATABASE ${name} WITH ALLOW_CONNECTIONS ${reachable}`);
    if (!reachable) await admin.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()', [name]);
  } finally {
    await admin.end();
  }
}

async function readyz(test: TestServer): Promise<{ status: number; body: any }> {
  const response = await fetch(`${test.url}/readyz`);
  return { status: response.status, body: await response.json() };
}

describe('/readyz', () => {
  let test: TestServer;

  beforeAll(async () => {
    // On every interface, so a scrape can also arrive from a non-loopback address (last test).
    test = await startTestServer({ controlPlane: { localAgents: false }, gateway: { host: '0.0.0.0' } });
  });

  afterAll(async () => {
    if (test) await setDatabaseReachable(test.databaseUrl, true);
    await test?.stop();
  });

  it('answers 503 naming the database while it is unreachable, and 200 once it is back; requests meanwhile get 503, never 500', async () => {
    // A key never looked up yet: its first request must reach the database.
    const workspace = await test.createWorkspace();
    expect((await readyz(test)).status).toBe(200);
    await setDatabaseReachable(test.databaseUrl, false);
    let result = await readyz(test);
    await waitFor(async () => (result = await readyz(test)).status === 503, 10_000, '/readyz to notice the database is gone');
    expect(result.body).toEqual({ status: 'not_ready', not_ready: ['database'], checks: { rate_limits: 'ok', database: 'failing', agent_server: 'ok', shutdown: 'ok' } });
    const rest = await fetch(`${test.url}/d/any-deployment-1/v1/models`, { headers: { authorization: `Bearer ${workspace.apiKey}` } });
    expect(rest.status).toBe(503);
    expect(rest.headers.get('retry-after')).toBe('2');
    expect(((await rest.json()) as any).error).toMatchObject({ code: 'service_unavailable', type: 'service_unavailable_error' });
    const graphql = await fetch(`${test.url}/graphql`, {
      method: 'POST', headers: { authorization: `Bearer mk-${'x'.repeat(43)}`, 'content-type': 'application/json' }, body: JSON.stringify({ query: '{ deployments { id } }' }),
    });
    expect(((await graphql.json()) as any).errors[0].extensions.code).toBe('UNAVAILABLE');
    // The liveness probe does not depend on the database: restarting would not help.
    expect((await fetch(`${test.url}/healthz`)).status).toBe(200);

    await setDatabaseReachable(test.databaseUrl, true);
    await waitFor(async () => (await readyz(test)).status === 200, 10_000, '/readyz to recover');
  });

  it('stays ready but says so when rate limits fall back to each server (Redis away)', async () => {
    const readiness = new Readiness(controlPlaneProbes({
      dataSource: test.server.controlPlane.dataSource, grpcHost: '127.0.0.1', agentServer: test.server.controlPlane.agentServer,
      rateLimiter: { degraded: () => 'Redis is unreachable: each server limits requests in its own process until it is back' },
    }), pino({ level: 'silent' }));
    const report = await readiness.report();
    expect(report.ready).toBe(true);
    expect(report.body).toEqual({
      status: 'ready', checks: { rate_limits: 'degraded', database: 'ok', agent_server: 'ok', shutdown: 'ok' },
      degraded: { rate_limits: 'Redis is unreachable: each server limits requests in its own process until it is back' },
    });
  });

  it('fails the agent_server probe when nothing listens on the agent port', async () => {
    const closed = net.createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const port = (closed.address() as net.AddressInfo).port;
    await new Promise<void>((resolve) => closed.close(() => resolve()));
    const probes = controlPlaneProbes({ dataSource: test.server.controlPlane.dataSource, grpcHost: '0.0.0.0', agentServer: { port } }, 500);
    const results = await Promise.all(probes.map((probe) => probe.check().then(() => 'ok', () => 'failing')));
    expect(Object.fromEntries(probes.map((probe, index) => [probe.name, results[index]]))).toEqual({ database: 'ok', agent_server: 'failing', rate_limits: 'ok' });
    const live = controlPlaneProbes({ dataSource: test.server.controlPlane.dataSource, grpcHost: '0.0.0.0', agentServer: test.server.controlPlane.agentServer });
    await expect(live[1].check()).resolves.toBeUndefined();
  });

  it('refuses /metrics to a client on another address when no token is set', async () => {
    const external = Object.values(os.networkInterfaces()).flat().find((entry) => entry && entry.family === 'IPv4' && !entry.internal);
    const port = new URL(test.url).port;
    expect((await fetch(`http://127.0.0.1:${port}/metrics`)).status).toBe(200);
    if (!external) return; // a host with loopback only: the proxy-header test in telemetry.test.ts still covers refusals
    const remote = await fetch(`http://${external.address}:${port}/metrics`);
    expect(remote.status).toBe(403);
    expect((await remote.json()).error.message).toContain('METRICS_TOKEN');
  });
});

describe('/readyz during shutdown', () => {
  it('answers 503 shutdown as soon as the server starts stopping, while agents still drain', async () => {
    const { test } = await startWithDeployment();
    try {
      expect((await readyz(test)).status).toBe(200);
      const stopping = test.stop();
      // The gateway still listens while the local agent drains and exits.
      const during = await readyz(test);
      expect(during).toEqual({ status: 503, body: { status: 'not_ready', not_ready: ['shutdown'], checks: { shutdown: 'shutting_down' } } });
      await stopping;
    } catch (error) {
      await test.stop().catch(() => {});
      throw error;
    }
  });
});

describe('/metrics with METRICS_TOKEN', () => {
  const token = 'metrics-token-0123456789abcdef';
  const test = serverForSuite({ controlPlane: { localAgents: false }, gateway: { metricsToken: token } });

  it('refuses scrapes without the token, even from loopback, and serves them with it', async () => {
    const missing = await fetch(`${test.url}/metrics`);
    expect(missing.status).toBe(401);
    expect((await missing.json()).error.type).toBe('authentication_error');
    expect((await fetch(`${test.url}/metrics`, { headers: { authorization: `Bearer ${token}x` } })).status).toBe(401);
    expect((await fetch(`${test.url}/metrics`, { headers: { authorization: token } })).status).toBe(401);
    const allowed = await fetch(`${test.url}/metrics`, { headers: { authorization: `bearer ${token}`, 'x-forwarded-for': '203.0.113.9' } });
    expect(allowed.status).toBe(200);
    expect(await allowed.text()).toContain('# TYPE inference_requests_total counter');
  });
});
