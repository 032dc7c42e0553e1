import { createTestDatabase, dropTestDatabase } from '../support/test-database';
import { query } from './support/database';
import { isRunning, within } from './support/processes';
import { ServerProcess } from './support/server-process';

/** Local agents run for a deployment; the model needs no weights (the CPU engine). */
const MODEL = 'meta-llama/Llama-3.1-8B-Instruct';
/** Figure under test: every local agent is gone this soon after its server's kill -9. */
const AGENT_EXIT_BOUND_MS = 2_000;

describe('kill -9 of a server', () => {
  const servers: ServerProcess[] = [];
  const databases: string[] = [];
  const freshDatabase = async () => {
    databases.push(await createTestDatabase());
    return databases.at(-1)!;
  };

  afterEach(async () => {
    for (const server of servers.splice(0)) await server.dispose();
    for (const databaseUrl of databases.splice(0)) await dropTestDatabase(databaseUrl);
  });

  it(`takes its local agents with it within ${AGENT_EXIT_BOUND_MS} ms, and none joins the server started in its place`, async () => {
    const databaseUrl = await freshDatabase();
    const first = await ServerProcess.start({ databaseUrl });
    servers.push(first);
    // The first run's deployment (1 replica) and one more with 2: three agent processes.
    await first.graphql(`mutation($model: String!) { createDeployment(input: {modelId: $model, priceCapPerHour: 1, minReplicas: 2, maxReplicas: 2}) { deployment { id } } }`, { model: MODEL });
    await within(async () => (await query(databaseUrl, `SELECT id FROM replicas WHERE status = 'Running'`)).length === 3, 30_000, '3 running replicas', 100);
    const agents = first.agentPids();
    expect(agents).toHaveLength(3);
    const [{ id: firstServerId }] = await query<{ id: string }>(databaseUrl, 'SELECT id FROM servers');

    first.kill9();
    const startedAt = performance.now();
    // Measured, not asserted yet: the second half runs either way, so a failure reports both figures.
    const exitMs = await within(() => agents.every((pid) => !isRunning(pid)), AGENT_EXIT_BOUND_MS + 1_000, 'the agents to exit').catch(() => Infinity);
    const survivors = agents.filter(isRunning);

    // Another server on the same database and gRPC port, as a supervisor restarting the dead one
    // would start it, without agents of its own: a stray agent would redial this port and join it.
    const second = await ServerProcess.start({ databaseUrl, grpcPort: first.grpcPort, env: { LOCAL_AGENTS: 'false' } });
    servers.push(second);
    // Past a stray's reconnect attempts while the second server listens (backoff 250 ms doubling,
    // full jitter: the 5th attempt comes at most 7.75 s after the kill).
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, 10_000 - (performance.now() - startedAt))));
    const joined = await query(databaseUrl, `SELECT id, agent_id FROM replicas WHERE server_id IS DISTINCT FROM $1 AND server_id IS NOT NULL`, [firstServerId]);

    console.info(`[faults] server kill -9: ${agents.length} local agents exited ${Number.isFinite(exitMs) ? `within ${Math.round(exitMs)} ms` : `not in time (${survivors.length} still running after ${AGENT_EXIT_BOUND_MS + 1_000} ms)`}; replicas joined to the restarted server: ${joined.length}`);
    expect(survivors).toEqual([]);
    expect(exitMs).toBeLessThan(AGENT_EXIT_BOUND_MS);
    expect(joined).toEqual([]);
  }, 90_000);

  it('kill -9 of the launcher (npm start): the server notices, drains its agents and exits, rather than running on unsupervised', async () => {
    const server = await ServerProcess.start({ databaseUrl: await freshDatabase(), env: { LOG_LEVEL: 'info' } });
    servers.push(server);
    await within(() => server.agentPids().length === 1 && server.output().includes('welcomed by the control plane'), 30_000, 'the first run\'s agent', 50);
    const agents = server.agentPids();

    server.kill9Launcher();
    const startedAt = performance.now();
    const exitMs = await within(() => !isRunning(server.pid) && agents.every((pid) => !isRunning(pid)), 15_000, 'the server and its agents to exit', 20)
      .then(() => performance.now() - startedAt, () => Infinity);

    console.info(`[faults] launcher kill -9: server and agent ${Number.isFinite(exitMs) ? `exited ${Math.round(exitMs)} ms after` : 'still running 15 s after'}`);
    expect(Number.isFinite(exitMs)).toBe(true);
    expect(server.output()).toContain('the launcher is gone');
  }, 60_000);

  it('the control case: SIGTERM still drains its agents (each says it stopped after a drain, exit code 0), none exits as an orphan', async () => {
    const server = await ServerProcess.start({ databaseUrl: await freshDatabase(), env: { LOG_LEVEL: 'info' } });
    servers.push(server);
    await within(() => server.agentPids().length === 1 && server.output().includes('welcomed by the control plane'), 30_000, 'the first run\'s agent', 50);
    const agents = server.agentPids();
    expect(await server.signal('SIGTERM', 30_000)).toBe(0);
    expect(agents.filter(isRunning)).toEqual([]);
    // The server logs each agent's own records (local provider: stdout and stderr relayed), its
    // message as the line's and its fields nested under `agent`.
    const agentLines = server.output().split('\n').flatMap((line) => {
      try {
        const record = JSON.parse(line);
        return record.source === 'agent' && typeof record.agent === 'object' ? [{ msg: record.msg, ...record.agent }] : [];
      } catch {
        return [];
      }
    });
    expect(agentLines.filter((line) => line.msg === 'agent stopped')).toEqual([expect.objectContaining({ exitCode: 0, reason: expect.stringMatching(/drain requested|SIGTERM/) })]);
    expect(agentLines.some((line) => line.msg === 'draining')).toBe(true);
    expect(server.output()).not.toContain('the process that spawned the agent is gone');
  }, 60_000);
});
