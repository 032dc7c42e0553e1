import { randomBytes } from 'node:crypto';
import { createTestDatabase, dropTestDatabase } from '../support/test-database';
import { call, percentile, type CallResult } from './support/http-call';
import { within } from './support/processes';
import { RedisProcess } from './support/redis-process';
import { ServerProcess } from './support/server-process';

/**
 * Redis killed and started again under load: two servers sharing rate limits through a
 * redis-server of the test's own (no persistence: it returns empty), a steady trickle of chat
 * completions on both and /readyz polled on both.
 *
 * Figures proved (each asserted below):
 * - while Redis is away every call is still served (200; none fails for want of Redis), each
 *   within CALL_BOUND_MS, and /readyz stays 200 but says `rate_limits: "degraded"` on both
 *   servers, within DEGRADED_BOUND_MS of the kill;
 * - meanwhile limits are each server's own: a key of RPM LIMIT gets LIMIT admitted on each
 *   server (2 × LIMIT in all);
 * - within RECOVERY_BOUND_MS of Redis's return both say `rate_limits: "ok"` again, and limits
 *   are shared again: LIMIT admitted in all, wherever the calls land (as before the outage).
 */
const LIMIT = 4;
const CALL_BOUND_MS = 5_000;
const DEGRADED_BOUND_MS = 2_000;
const RECOVERY_BOUND_MS = 10_000;
const OUTAGE_MS = 3_000;

interface Probe { server: number; startedAt: number; result: CallResult }

describe('Redis killed and started again under load', () => {
  let databaseUrl: string | undefined;
  let redis: RedisProcess | undefined;
  const servers: ServerProcess[] = [];

  afterAll(async () => {
    for (const server of servers) await server.dispose().catch(() => {});
    await redis?.dispose();
    if (databaseUrl) await dropTestDatabase(databaseUrl);
  });

  it(`keeps serving with per-server limits and /readyz degraded while it is away, and shares limits again within ${RECOVERY_BOUND_MS / 1000} s of its return`, async () => {
    databaseUrl = await createTestDatabase();
    redis = await RedisProcess.start();
    const env = { REDIS_URL: redis.url, REDIS_KEY_PREFIX: `fault-${randomBytes(3).toString('hex')}:`, DEFAULT_RPM_LIMIT: '100000' };
    // A runs the chat replica; B has none and relays to A (any server serves any request).
    const a = await ServerProcess.start({ databaseUrl, env });
    servers.push(a);
    const b = await ServerProcess.start({ databaseUrl, env: { ...env, LOCAL_AGENTS: 'false' } });
    servers.push(b);
    const apiKey = a.apiKey!;
    const [{ slug }] = (await a.graphql('{ deployments { slug } }')).deployments;
    const chat = (server: ServerProcess, key: string) => call(`${server.url}/d/${slug}/v1/chat/completions`, {
      headers: { authorization: `Bearer ${key}` }, timeoutMs: CALL_BOUND_MS,
      body: { messages: [{ role: 'user', content: 'hello' }], max_tokens: 3 },
    });
    await within(async () => (await chat(a, apiKey)).status === 200 && (await chat(b, apiKey)).status === 200, 30_000, 'both servers to serve chat', 200);
    const newKey = async (name: string) => (await a.graphql('mutation($name: String!, $rpm: Int!) { createApiKey(input: {name: $name, rpmLimit: $rpm}) { plaintext } }', { name, rpm: LIMIT })).createApiKey.plaintext as string;
    const keys = { before: await newKey('before'), during: await newKey('during'), after: await newKey('after') };
    /** 2 × LIMIT + 2 calls of one key, alternating A and B: how many each server admitted. */
    const burst = async (key: string) => {
      const admitted = [0, 0];
      const statuses: number[] = [];
      for (let index = 0; index < 2 * LIMIT + 2; index++) {
        const result = await chat(index % 2 === 0 ? a : b, key);
        statuses.push(result.status);
        if (result.status === 200) admitted[index % 2]++;
        else if (result.status !== 429) throw new Error(`burst call ${index}: ${result.status} ${result.text}`);
      }
      return { admitted, total: admitted[0] + admitted[1], statuses };
    };
    const readyz = async (server: ServerProcess) => {
      const result = await call(`${server.url}/readyz`, { timeoutMs: CALL_BOUND_MS });
      return { status: result.status, rateLimits: result.body?.checks?.rate_limits as string | undefined };
    };

    const sharedBefore = await burst(keys.before);

    // The trickle: a chat on each server every 100 ms, whatever Redis does.
    const t0 = performance.now();
    const probes: Probe[] = [];
    const pending = new Set<Promise<void>>();
    let turn = 0;
    const timer = setInterval(() => {
      const server = turn++ % 2;
      const startedAt = performance.now() - t0;
      const done = chat(servers[server], apiKey).then((result) => void probes.push({ server, startedAt, result }));
      pending.add(done);
      void done.finally(() => pending.delete(done));
    }, 50);
    // /readyz of both, every 50 ms: when each first said degraded, and ok again.
    const readiness: Array<{ at: number; server: number; status: number; rateLimits?: string }> = [];
    let polling = true;
    const poller = (async () => {
      while (polling) {
        const at = performance.now() - t0;
        const [first, second] = await Promise.all([readyz(a), readyz(b)]);
        readiness.push({ at, server: 0, ...first }, { at, server: 1, ...second });
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    })();

    let killedAt = 0;
    let backAt = 0;
    let degradedMs = [Infinity, Infinity];
    let recoveredMs = [Infinity, Infinity];
    let isolated = { admitted: [0, 0], total: 0, statuses: [] as number[] };
    let sharedAfter = { admitted: [0, 0], total: 0, statuses: [] as number[] };
    const firstAfter = (since: number, server: number, state: string) =>
      readiness.find((entry) => entry.at >= since && entry.server === server && entry.status === 200 && entry.rateLimits === state);
    try {
      await new Promise((resolve) => setTimeout(resolve, 1_000));
      killedAt = performance.now() - t0;
      await redis.kill();
      await within(() => [0, 1].every((server) => firstAfter(killedAt, server, 'degraded')), DEGRADED_BOUND_MS + 5_000, 'both servers to report degraded limits', 20).catch(() => {});
      degradedMs = [0, 1].map((server) => (firstAfter(killedAt, server, 'degraded')?.at ?? Infinity) - killedAt);
      isolated = await burst(keys.during);
      await new Promise((resolve) => setTimeout(resolve, Math.max(0, OUTAGE_MS - (performance.now() - t0 - killedAt))));
      await redis.restart();
      backAt = performance.now() - t0;
      await within(() => [0, 1].every((server) => firstAfter(backAt, server, 'ok')), RECOVERY_BOUND_MS + 5_000, 'both servers to report shared limits again', 20).catch(() => {});
      recoveredMs = [0, 1].map((server) => (firstAfter(backAt, server, 'ok')?.at ?? Infinity) - backAt);
      sharedAfter = await burst(keys.after);
      await new Promise((resolve) => setTimeout(resolve, 500));
    } finally {
      clearInterval(timer);
      polling = false;
      await poller;
      await Promise.all([...pending]);
    }

    const during = probes.filter((probe) => probe.startedAt >= killedAt && probe.startedAt < backAt);
    const failedProbes = probes.filter((probe) => probe.result.status !== 200);
    const slowest = Math.max(...probes.map((probe) => probe.result.ms));
    const notReady = readiness.filter((entry) => entry.status !== 200);
    console.info([
      `[faults] Redis kill -9 under load (2 servers, limits shared through Redis; key RPM ${LIMIT}, ${2 * LIMIT + 2} calls alternating A/B):`,
      `  before: ${sharedBefore.total} admitted (${sharedBefore.admitted.join(' on A + ')} on B) ${JSON.stringify(sharedBefore.statuses)}`,
      `  Redis killed: /readyz said rate_limits degraded (status 200) ${degradedMs.map((ms) => `${Math.round(ms)} ms`).join(' / ')} after the kill (A / B); limits per server: ${isolated.total} admitted (${isolated.admitted.join(' on A + ')} on B) ${JSON.stringify(isolated.statuses)}`,
      `  Redis back (empty) after ${(OUTAGE_MS / 1000).toFixed(0)} s: rate_limits ok ${recoveredMs.map((ms) => `${Math.round(ms)} ms`).join(' / ')} after its start (A / B); shared again: ${sharedAfter.total} admitted (${sharedAfter.admitted.join(' on A + ')} on B) ${JSON.stringify(sharedAfter.statuses)}`,
      `  trickle: ${probes.length - failedProbes.length}/${probes.length} chats answered 200 (${during.length} while Redis was away); slowest ${Math.round(slowest)} ms, p99 ${Math.round(percentile(probes.map((probe) => probe.result.ms), 99))} ms; /readyz not 200: ${notReady.length} of ${readiness.length}`,
      ...failedProbes.slice(0, 5).map((probe) => `  failed chat on ${probe.server ? 'B' : 'A'} at ${Math.round(probe.startedAt)} ms: ${probe.result.status} ${probe.result.error ?? probe.result.text.slice(0, 200)}`),
    ].join('\n'));

    // Shared before: LIMIT in all.
    expect(sharedBefore.total).toBe(LIMIT);
    // Away: served throughout, ready but degraded, each server limiting alone.
    expect(failedProbes).toEqual([]);
    expect(during.length).toBeGreaterThan(20);
    expect(slowest).toBeLessThan(CALL_BOUND_MS);
    expect(notReady).toEqual([]);
    expect(Math.max(...degradedMs)).toBeLessThan(DEGRADED_BOUND_MS);
    expect(isolated.admitted).toEqual([LIMIT, LIMIT]);
    // Back: ok again, and shared again.
    expect(Math.max(...recoveredMs)).toBeLessThan(RECOVERY_BOUND_MS);
    expect(sharedAfter.total).toBe(LIMIT);
  }, 120_000);
});
