import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { createTestDatabase, dropTestDatabase } from '../support/test-database';
import { startReceiver } from '../webhooks/support/receiver';
import { query } from './support/database';
import { call, graphqlCall, type CallResult } from './support/http-call';
import { isRunning, within } from './support/processes';
import { ServerProcess } from './support/server-process';
import { TcpBalancer } from './support/tcp-balancer';

/**
 * Scale-out under a crash: two real servers on one database behind a round-robin TCP balancer,
 * 1,000 async image jobs submitted through it, then kill -9 of one server while they run.
 *
 * Figures proved (each asserted below):
 * - 0 lost: every one of the 1,000 records ends terminal, in the database and as the client reads it;
 * - 0 run twice: each record entered `running` at most once (a trigger logs every status change),
 *   never left a terminal status, and each output object was uploaded under one job dispatch only
 *   (agents' uploads pass through a counting proxy: a second run would upload with a new link);
 * - 0 duplicate terminal events: each request's webhook deliveries carry one event id, whose type
 *   matches the record (deliveries of that one event may repeat: at-least-once);
 * - what fails is only what the dead server had claimed before it died (`pod_crash`, not
 *   billed): the jobs on its agent and those whose end it had not recorded yet;
 * - the other server serves throughout: every request sent through the balancer once the dead
 *   process is gone is answered, first try (the balancer skips the refusing backend);
 * - recovery time: kill → every record terminal, under RECOVERY_BOUND_MS;
 * - the dead server's local agents exit within AGENT_EXIT_BOUND_MS.
 */
const IMAGE_MODEL = 'black-forest-labs/FLUX.1-schnell';
const JOBS = 1_000;
const TERMINAL = ['succeeded', 'failed', 'canceled'];
/** Agents run this many jobs at once (the catalog's 1 would leave a single job to lose). */
const AGENT_SLOTS = 2;
/** How long after the kill a statement A sent before dying may still commit in PostgreSQL. */
const STATEMENT_IN_FLIGHT_MS = 250;
const AGENT_EXIT_BOUND_MS = 2_000;
const RECOVERY_BOUND_MS = 60_000;
/** Kill once this many records are terminal: work is in progress, most of it still to come. */
const KILL_AFTER_TERMINAL = 200;

const EVENT_TYPES: Record<string, string> = { succeeded: 'request.completed', failed: 'request.failed', canceled: 'request.canceled' };

describe('two servers behind a load balancer, kill -9 of one with 1,000 async image jobs', () => {
  let databaseUrl: string | undefined;
  const servers: ServerProcess[] = [];
  const proxies: TcpBalancer[] = [];
  const dataDirs: string[] = [];
  let receiver: Awaited<ReturnType<typeof startReceiver>> | undefined;

  afterAll(async () => {
    for (const server of servers) await server.dispose().catch(() => {});
    for (const proxy of proxies) await proxy.close().catch(() => {});
    await receiver?.close().catch(() => {});
    for (const dir of dataDirs) fs.rmSync(dir, { recursive: true, force: true });
    if (databaseUrl) await dropTestDatabase(databaseUrl);
  });

  it(`loses none, runs none twice, sends one terminal event each, and recovers within ${RECOVERY_BOUND_MS / 1000} s; the dead server's agents exit within ${AGENT_EXIT_BOUND_MS} ms`, async () => {
    databaseUrl = await createTestDatabase();
    receiver = await startReceiver();
    const balancer = await TcpBalancer.start();
    proxies.push(balancer);

    // Agents upload outputs to PUBLIC_URL: a proxy in front of each server sees every upload
    // (per object key, the set of presigned links used; a second dispatch signs a new one).
    const uploadLinks = new Map<string, Set<string>>();
    let uploads = 0;
    const onRequestLine = (method: string, target: string) => {
      if (method !== 'PUT' || !target.startsWith('/files/outputs/')) return;
      uploads++;
      const key = decodeURIComponent(target.slice('/files/outputs/'.length).split('?')[0]);
      if (!uploadLinks.has(key)) uploadLinks.set(key, new Set());
      uploadLinks.get(key)!.add(target);
    };
    const shared = {
      SECRETS_ENCRYPTION_KEY: randomBytes(32).toString('hex'), STORAGE_SIGNING_KEY: randomBytes(32).toString('hex'),
      CLUSTER_HEARTBEAT_INTERVAL_MS: '200', CLUSTER_SERVER_TIMEOUT_MS: '1500',
      REQUEST_LEASE_MS: '2000', REQUEST_SWEEP_INTERVAL_MS: '250',
      WEBHOOK_ALLOW_INSECURE_LOOPBACK: 'true', WEBHOOK_RETRY_SCHEDULE_MS: '200,500', WEBHOOK_ATTEMPT_TIMEOUT_MS: '2000',
      LOCAL_MEDIA_AGENT_MAX_CONCURRENCY: String(AGENT_SLOTS), DEFAULT_RPM_LIMIT: '1000000', MAX_QUEUED_PER_DEPLOYMENT: '5000',
    };
    const startServer = async (name: string, env: Record<string, string>) => {
      const front = await TcpBalancer.start({ onRequestLine });
      proxies.push(front);
      const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), `fault-scale-${name}-`));
      dataDirs.push(dataDir);
      const server = await ServerProcess.start({ databaseUrl: databaseUrl!, env: { ...shared, DATA_DIR: dataDir, PUBLIC_URL: front.url, ...env } });
      servers.push(server);
      front.setBackends([Number(new URL(server.url).port)]);
      return { server, dataDir };
    };

    // A places its replicas only when asked (no capacity passes of its own), so that the second
    // replica is placed by B, on B, deterministically: local agents belong to the server that placed them.
    const a = await startServer('a', { CAPACITY_INTERVAL_MS: '600000' });
    const apiKey = a.server.apiKey!;
    const [{ id: serverA }] = await query<{ id: string }>(databaseUrl, 'SELECT id FROM servers');
    const b = await startServer('b', { CAPACITY_INTERVAL_MS: '200' });
    balancer.setBackends([a.server.url, b.server.url].map((url) => Number(new URL(url).port)));
    const gql = async (url: string, text: string, variables: Record<string, unknown> = {}) => {
      const result = await graphqlCall(url, apiKey, text, variables);
      if (result.status !== 200 || result.body?.errors) throw new Error(`GraphQL ${result.status}: ${result.text}`);
      return result.body.data;
    };

    // The first run's chat deployment is not part of this test: its agent would only take CPU.
    for (const deployment of (await gql(a.server.url, '{ deployments { id } }')).deployments) {
      await gql(a.server.url, 'mutation($id: ID!) { deleteDeployment(id: $id) { id } }', { id: deployment.id });
    }
    const { deployment } = (await gql(a.server.url, `mutation($model: String!) { createDeployment(input: {modelId: $model, priceCapPerHour: 1, minReplicas: 1, maxReplicas: 1}) { deployment { id slug } } }`, { model: IMAGE_MODEL })).createDeployment;
    const running = () => query<{ server_id: string }>(databaseUrl!, `SELECT server_id FROM replicas WHERE deployment_id = $1 AND status = 'Running'`, [deployment.id]);
    await within(async () => (await running()).length === 1, 30_000, 'the image replica on A', 100);
    await gql(b.server.url, 'mutation($id: ID!) { updateDeployment(id: $id, input: {minReplicas: 2, maxReplicas: 2}) { id } }', { id: deployment.id });
    await within(async () => (await running()).length === 2, 30_000, 'a second image replica, on B', 100);
    const holders = (await running()).map((row) => row.server_id);
    expect(holders.filter((id) => id === serverA)).toHaveLength(1);
    // The deleted chat deployment's agent leaves (drained); A then runs the image agent alone.
    await within(() => a.server.agentPids().length === 1, 15_000, 'A to run only its image agent', 100);
    const agentsOfA = a.server.agentPids();

    // Every status change of every record, written by the database itself.
    await query(databaseUrl, `
      CREATE TABLE fault_status_log (request_id text NOT NULL, old_status text, new_status text NOT NULL, lease_owner text, at timestamptz NOT NULL DEFAULT clock_timestamp());
      CREATE FUNCTION fault_log_status() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
        IF TG_OP = 'INSERT' OR NEW.status IS DISTINCT FROM OLD.status THEN
          INSERT INTO fault_status_log (request_id, old_status, new_status, lease_owner)
          VALUES (NEW.id, CASE WHEN TG_OP = 'UPDATE' THEN OLD.status END, NEW.status, NEW.lease_owner);
        END IF;
        RETURN NEW;
      END $$;
      CREATE TRIGGER fault_log_status AFTER INSERT OR UPDATE ON request_records FOR EACH ROW EXECUTE FUNCTION fault_log_status();`);

    // 1,000 submissions through the balancer, 16 at a time over keep-alive connections.
    const base = `${balancer.url}/d/${deployment.slug}/v1`;
    const auth = { authorization: `Bearer ${apiKey}` };
    const keepAlive = new http.Agent({ keepAlive: true, maxSockets: 16 });
    const ids: string[] = new Array(JOBS);
    const submitStartedAt = performance.now();
    let nextJob = 0;
    await Promise.all(Array.from({ length: 16 }, async () => {
      while (nextJob < JOBS) {
        const index = nextJob++;
        let result: CallResult | undefined;
        // A connection error is retried with the same Idempotency-Key: the same record comes back.
        for (let attempt = 0; attempt < 3 && (!result || result.status === 0); attempt++) {
          result = await call(`${base}/images/generations?async=true`, {
            agent: keepAlive, headers: { ...auth, 'idempotency-key': `fault-${index}` },
            body: { model: IMAGE_MODEL, prompt: `fault job ${index}`, size: '512x512', webhook_url: `${receiver!.base}/ok/jobs` },
          });
        }
        if (result!.status !== 202) throw new Error(`submission ${index}: ${result!.status} ${result!.text}`);
        ids[index] = result!.body.id;
      }
    }));
    keepAlive.destroy();
    const submitMs = performance.now() - submitStartedAt;
    expect(new Set(ids).size).toBe(JOBS);

    const counts = async () => Object.fromEntries((await query<{ status: string; count: string }>(databaseUrl!,
      'SELECT status, count(*) AS count FROM request_records WHERE id = ANY($1) GROUP BY status', [ids])).map((row) => [row.status, Number(row.count)])) as Record<string, number>;
    const terminalCount = (byStatus: Record<string, number>) => TERMINAL.reduce((sum, status) => sum + (byStatus[status] ?? 0), 0);
    const runningOnA = async () => Number((await query<{ count: string }>(databaseUrl!, `SELECT count(*) AS count FROM request_records WHERE status = 'running' AND lease_owner = $1`, [serverA]))[0].count);
    await within(async () => terminalCount(await counts()) >= KILL_AFTER_TERMINAL && (await runningOnA()) > 0, 60_000, `${KILL_AFTER_TERMINAL} records terminal and a job running on A`, 5);

    // kill -9 of A, with jobs on its agent.
    const atKill = await counts();
    a.server.kill9();
    const killedAt = performance.now();
    const killedAtWall = Date.now();
    // From here on, every figure is measured from the kill, watched side by side.
    const since = (check: () => boolean | Promise<boolean>, timeoutMs: number, what: string, intervalMs: number) =>
      within(check, timeoutMs, what, intervalMs).then(() => performance.now() - killedAt);
    const agentExit = since(() => agentsOfA.every((pid) => !isRunning(pid)), AGENT_EXIT_BOUND_MS + 1_000, 'A\'s agents to exit', 10).catch(() => Infinity);
    const replaced = since(async () => {
      const rows = await running();
      return rows.length === 2 && !rows.some((row) => row.server_id === serverA);
    }, RECOVERY_BOUND_MS + 30_000, 'A\'s replica replaced on B', 50).catch(() => Infinity);

    // Once A's port refuses connections (the last of its threads exited), a client keeps calling
    // through the balancer, a fresh connection each time. A call A had accepted the instant it
    // died is cut: a TCP balancer cannot replay it, the client retries (the OpenAI SDKs do).
    const goneMs = await since(() => TcpBalancer.refuses(Number(new URL(a.server.url).port)), 5_000, 'A\'s port to refuse connections', 1);
    const probes: Array<{ at: number; what: string; ok: boolean; detail: string }> = [];
    let probing = true;
    const prober = (async () => {
      for (let turn = 0; probing; turn++) {
        const id = ids[turn % JOBS];
        const at = performance.now() - killedAt;
        if (turn % 2 === 0) {
          const result = await call(`${base}/requests/${id}`, { headers: auth, timeoutMs: 5_000 });
          probes.push({ at, what: 'GET /v1/requests/{id}', ok: result.status === 200 && result.body?.id === id, detail: `${result.status} ${result.error ?? ''}` });
        } else {
          const result = await graphqlCall(balancer.url, apiKey, 'query($id: ID!) { request(id: $id) { id status } }', { id }, { timeoutMs: 5_000 });
          probes.push({ at, what: 'GraphQL request(id)', ok: result.status === 200 && result.body?.data?.request?.id === id, detail: `${result.status} ${result.error ?? result.text.slice(0, 200)}` });
        }
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    })();
    let recoveryMs: number;
    try {
      recoveryMs = await since(async () => terminalCount(await counts()) === JOBS, RECOVERY_BOUND_MS + 30_000, 'every record to be terminal', 100);
    } finally {
      probing = false;
      await prober;
    }
    const agentExitMs = await agentExit;
    const replacedMs = await replaced;
    const final = await counts();

    // The client's view: every record, read back through the balancer.
    const reader = new http.Agent({ keepAlive: true, maxSockets: 16 });
    const clientStatus = new Map<string, string>();
    let nextRead = 0;
    await Promise.all(Array.from({ length: 16 }, async () => {
      while (nextRead < JOBS) {
        const id = ids[nextRead++];
        const result = await call(`${base}/requests/${id}`, { agent: reader, headers: auth });
        clientStatus.set(id, result.status === 200 ? result.body.status : `http ${result.status}`);
      }
    }));
    reader.destroy();

    // Webhooks: wait until every record's terminal event arrived, then a moment for late repeats.
    const eventsOf = () => {
      const byRequest = new Map<string, Map<string, { type: string; status: string; deliveries: number }>>();
      for (const delivery of receiver!.at('/ok/jobs')) {
        const event = JSON.parse(delivery.rawBody.toString('utf8'));
        const events = byRequest.get(event.data.id) ?? new Map();
        byRequest.set(event.data.id, events);
        const seen = events.get(event.id) ?? { type: event.type, status: event.data.status, deliveries: 0 };
        seen.deliveries++;
        events.set(event.id, seen);
      }
      return byRequest;
    };
    const webhooksMs = await since(() => ids.every((id) => eventsOf().has(id)), 60_000, 'a webhook for every record', 200);
    await new Promise((resolve) => setTimeout(resolve, 1_000));

    const records = await query<{ id: string; status: string; error_code: string | null; output_keys: string[]; completed_at: Date; billed_gpu_seconds: string }>(databaseUrl,
      'SELECT id, status, error_code, output_keys, completed_at, billed_gpu_seconds FROM request_records WHERE id = ANY($1)', [ids]);
    const log = await query<{ request_id: string; old_status: string | null; new_status: string; lease_owner: string | null; at: Date }>(databaseUrl,
      'SELECT request_id, old_status, new_status, lease_owner, at FROM fault_status_log WHERE request_id = ANY($1) ORDER BY at', [ids]);
    const transitions = new Map<string, Array<{ from: string | null; to: string }>>();
    for (const row of log) transitions.set(row.request_id, [...(transitions.get(row.request_id) ?? []), { from: row.old_status, to: row.new_status }]);
    const claimedTwice = ids.filter((id) => (transitions.get(id) ?? []).filter((step) => step.to === 'running').length > 1);
    const terminalTwice = ids.filter((id) => (transitions.get(id) ?? []).filter((step) => TERMINAL.includes(step.to)).length !== 1);
    const leftTerminal = log.filter((row) => row.old_status !== null && TERMINAL.includes(row.old_status));
    // A claim A had already sent when it died still commits (PostgreSQL runs a statement it has
    // received): it is A's claim, stamped a few ms after the kill (seen: +6 ms). Later than this,
    // a claim by A would be a bug.
    const claimedByABeforeKill = (id: string) => log.some((row) => row.request_id === id && row.new_status === 'running'
      && row.lease_owner === serverA && new Date(row.at).getTime() <= killedAtWall + STATEMENT_IN_FLIGHT_MS);
    const uploadedTwice = [...uploadLinks].filter(([, links]) => links.size > 1).map(([key]) => key);
    const objectsDirs = [a.dataDir, b.dataDir].map((dir) => path.join(dir, 'objects', 'outputs'));
    const succeeded = records.filter((record) => record.status === 'succeeded');
    const outputsMissing = succeeded.flatMap((record) => record.output_keys)
      .filter((key) => uploadLinks.get(key)?.size !== 1 || !objectsDirs.some((dir) => fs.existsSync(path.join(dir, key))));
    const failed = records.filter((record) => record.status === 'failed');
    const failureCodes = [...new Set(failed.map((record) => record.error_code))];
    const lastFailureMs = failed.length ? Math.max(...failed.map((record) => new Date(record.completed_at).getTime())) - killedAtWall : 0;
    // A job its agent finished whose end the dead server never recorded: failed, its upload left behind.
    const orphanedOutputs = [...uploadLinks.keys()].filter((key) => failed.some((record) => key.includes(`/${record.id}/`))
      && objectsDirs.some((dir) => fs.existsSync(path.join(dir, key))));
    const events = eventsOf();
    const twoEvents = ids.filter((id) => events.get(id)!.size !== 1);
    const statusById = new Map(records.map((record) => [record.id, record.status]));
    const wrongEvent = ids.filter((id) => [...events.get(id)!.values()].some((event) => event.type !== EVENT_TYPES[statusById.get(id)!] || event.status !== statusById.get(id)));
    const deliveries = receiver.at('/ok/jobs').length;
    const repeatedDeliveries = deliveries - ids.length;
    const failedProbes = probes.filter((probe) => !probe.ok);
    const clientMismatch = ids.filter((id) => clientStatus.get(id) !== statusById.get(id));

    console.info([
      `[faults] scale-out kill -9: ${JOBS} async image jobs submitted through the balancer in ${(submitMs / 1000).toFixed(1)} s; killed server A with ${JSON.stringify(atKill)}`,
      `  A's port refused connections ${goneMs.toFixed(1)} ms after the kill; its ${agentsOfA.length} agent(s) exited ${Number.isFinite(agentExitMs) ? `within ${Math.round(agentExitMs)} ms` : 'NOT in time'}; A's replica replaced on B ${(replacedMs / 1000).toFixed(1)} s after the kill`,
      `  all ${JOBS} terminal ${(recoveryMs / 1000).toFixed(1)} s after the kill: ${JSON.stringify(final)}; failures ${JSON.stringify(failureCodes)} (all claimed by A before the kill: ${failed.every((record) => claimedByABeforeKill(record.id))}), the last ${(lastFailureMs / 1000).toFixed(1)} s after the kill`,
      `  lost 0 of ${JOBS} (client read back ${JOBS - clientMismatch.length} terminal); claimed twice ${claimedTwice.length}; terminal twice ${terminalTwice.length}; left terminal ${leftTerminal.length}; outputs uploaded under two dispatches ${uploadedTwice.length} (${uploads} uploads in all); succeeded outputs missing ${outputsMissing.length}; outputs of failed jobs left in storage ${orphanedOutputs.length}`,
      `  webhooks: every record's event received ${(webhooksMs / 1000).toFixed(1)} s after the kill; ${deliveries} deliveries, ${repeatedDeliveries} repeats of an event already delivered; records with two terminal events ${twoEvents.length}, with a wrong event ${wrongEvent.length}`,
      `  balancer during/after the kill: ${probes.length - failedProbes.length}/${probes.length} calls answered; connects refused by the dead backend ${balancer.backends[0].failedConnects}`,
      ...failedProbes.map((probe) => `  failed call ${Math.round(probe.at)} ms after the kill: ${probe.what} ${probe.detail}`),
      ...failed.map((record) => `  failed ${record.id} ${record.error_code}: ${log.filter((row) => row.request_id === record.id).map((row) => `${row.new_status}@${new Date(row.at).getTime() - killedAtWall}ms(${row.lease_owner === serverA ? 'A' : row.lease_owner ? 'B' : '-'})`).join(' → ')}`),
    ].join('\n'));

    expect(agentExitMs).toBeLessThan(AGENT_EXIT_BOUND_MS);
    // Work was in progress at the kill, and queued work left for the other server to take over.
    expect(atKill.running ?? 0).toBeGreaterThan(0);
    expect(atKill.queued ?? 0).toBeGreaterThanOrEqual(JOBS / 10);
    // 0 lost.
    expect(records).toHaveLength(JOBS);
    expect(terminalCount(final)).toBe(JOBS);
    expect(clientMismatch).toEqual([]);
    expect(recoveryMs).toBeLessThan(RECOVERY_BOUND_MS);
    // Only what the dead server was running fails, as pod_crash, and is not billed.
    expect(failureCodes.every((code) => code === 'pod_crash')).toBe(true);
    // (its claims: jobs on its agent, plus any whose end it had not recorded yet when it died).
    expect(failed.length).toBeLessThanOrEqual(2 * AGENT_SLOTS);
    expect(failed.filter((record) => !claimedByABeforeKill(record.id))).toEqual([]);
    expect(failed.every((record) => Number(record.billed_gpu_seconds) === 0)).toBe(true);
    expect(final.canceled ?? 0).toBe(0);
    // 0 run twice.
    expect(claimedTwice).toEqual([]);
    expect(terminalTwice).toEqual([]);
    expect(leftTerminal).toEqual([]);
    expect(uploadedTwice).toEqual([]);
    expect(outputsMissing).toEqual([]);
    // 0 duplicate terminal events, none missing, each matching its record.
    expect(twoEvents).toEqual([]);
    expect(wrongEvent).toEqual([]);
    // The other server served throughout.
    expect(failedProbes).toEqual([]);
    expect(probes.length).toBeGreaterThan(10);
  }, 240_000);
});
