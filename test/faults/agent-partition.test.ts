import { Replica } from '../../control-plane/replicas/replica.entity';
import { UsageRecord } from '../../control-plane/usage/usage-record.entity';
import { FAST_AGENT_ENV, startTestServer, waitFor, type TestServer } from '../support/test-server';
import { postChat, userChat } from '../support/chat';
import { assertAgentBuilt, spawnAgent, type AgentProcess } from '../worker-agent/support/agent-process';
import { PartitionProxy } from './support/partition-proxy';
import { within } from './support/processes';
import { SseReader } from './support/sse-reader';

const MODEL = 'meta-llama/Llama-3.1-8B-Instruct';
/** AGENT_HEARTBEAT_INTERVAL_MS of the server (announced to the agent in Welcome). */
const HEARTBEAT_INTERVAL_MS = 300;
/**
 * Server side: a stream silent for 3 intervals is ended by a sweep that runs every interval, so
 * at most 4 intervals pass between the last frame received and the end.
 */
const SERVER_DETECTION_BOUND_MS = 4 * HEARTBEAT_INTERVAL_MS;
/** Agent side (WORKER_KEEPALIVE_*): the next ping is due within the interval and times out after the timeout. */
const KEEPALIVE_INTERVAL_MS = 500;
const KEEPALIVE_TIMEOUT_MS = 500;
const AGENT_DETECTION_BOUND_MS = KEEPALIVE_INTERVAL_MS + KEEPALIVE_TIMEOUT_MS;
/** Timers fire late on a loaded machine: the slack allowed over each bound. */
const SCHEDULING_SLACK_MS = 250;

describe('agent ↔ server partition (a TCP proxy that stops forwarding without closing anything)', () => {
  let test: TestServer;
  let proxy: PartitionProxy | undefined;
  const disposables: Array<() => Promise<unknown>> = [];

  beforeAll(async () => {
    assertAgentBuilt();
    test = await startTestServer({ controlPlane: { localAgents: false, heartbeatIntervalMs: HEARTBEAT_INTERVAL_MS } });
  });

  afterAll(async () => {
    for (const dispose of disposables.splice(0).reverse()) await dispose();
    await proxy?.close();
    await test?.stop();
  });

  it(`both sides detect the partition (server < ${SERVER_DETECTION_BOUND_MS} ms, agent < ${AGENT_DETECTION_BOUND_MS} ms), the stream in flight ends with an error event, and the agent rejoins after the heal`, async () => {
    const { controlPlane } = test.server;
    const workspace = await test.createWorkspace();
    const { deployment, joinToken } = await controlPlane.deployments.create(workspace.workspaceId, {
      modelId: MODEL, priceCapPerHour: 1, minReplicas: 1, maxReplicas: 1, autoscale: false, provider: 'external',
    });
    proxy = await PartitionProxy.start({ host: '127.0.0.1', port: controlPlane.agentServer.port });
    const agent: AgentProcess = spawnAgent({
      ...FAST_AGENT_ENV, WORKER_CONTROL_PLANE: proxy.address, WORKER_JOIN_TOKEN: joinToken!, WORKER_AGENT_ID: 'agt_partitioned',
      WORKER_CPU_TEST_CONTROLS: 'true', WORKER_KEEPALIVE_INTERVAL_MS: String(KEEPALIVE_INTERVAL_MS), WORKER_KEEPALIVE_TIMEOUT_MS: String(KEEPALIVE_TIMEOUT_MS),
    }, disposables);
    await test.waitForReplicas(deployment.id, 1);
    const chat = (body: Record<string, unknown>) => postChat(`${test.url}/d/${deployment.slug}/v1`, workspace.apiKey, userChat('a long answer please', body));

    const response = await chat({ stream: true, max_tokens: 400, cpu_engine: { tokens_per_second: 20 } });
    expect(response.status).toBe(200);
    const stream = new SseReader(response);
    await stream.until(() => stream.chunks >= 3, 10_000, '3 chunks');
    const streamsClosedBefore = streamClosedLines(agent).length;

    const partitionedAt = performance.now();
    const partitionedAtWallClock = Date.now();
    proxy.partition();
    const serverDetectedMs = await within(() => controlPlane.dispatcher.readyReplicas(deployment.id) === 0, 10_000, 'the server to end the silent stream');
    await stream.done;
    const terminal = stream.terminalError;
    expect(terminal).toBeDefined();
    expect(terminal!.error.message).toMatch(/replica serving this request failed/);
    const clientHeardMs = terminal!.event.at - partitionedAt;
    await within(() => streamClosedLines(agent).length > streamsClosedBefore, 10_000, 'the agent to end its silent stream');
    const agentClosed = streamClosedLines(agent)[streamsClosedBefore];
    const agentDetectedMs = agentClosed.time - partitionedAtWallClock;
    // Neither side closed a socket: only their own timers noticed.
    expect(proxy.openConnections).toBeGreaterThanOrEqual(1);
    const replicas = controlPlane.dataSource.getRepository(Replica);
    const replica = await replicas.findOneByOrFail({ deploymentId: deployment.id, agentId: 'agt_partitioned' });
    // Written just after the stream ended, asynchronously.
    await waitFor(async () => (await replicas.findOneByOrFail({ id: replica.id })).status === 'Unhealthy', 5_000, 'the replica to turn Unhealthy');

    const healedAt = performance.now();
    proxy.heal();
    const rejoinedMs = await within(() => controlPlane.dispatcher.readyReplicas(deployment.id) === 1, 15_000, 'the agent to rejoin', 20);
    const next = await chat({ max_tokens: 5 });
    expect(next.status).toBe(200);
    const servedMs = performance.now() - healedAt;
    // Served through the same agent: the one replica, which it rejoined.
    const records = controlPlane.dataSource.getRepository(UsageRecord);
    await waitFor(async () => (await records.countBy({ deploymentId: deployment.id, status: 'succeeded' })) === 1, 5_000, 'the usage record');
    expect((await records.findOneByOrFail({ deploymentId: deployment.id, status: 'succeeded' })).replicaId).toBe(replica.id);
    expect((await replicas.findOneByOrFail({ id: replica.id })).status).toBe('Running');
    expect(agent.child.exitCode).toBeNull();

    console.info(`[faults] partition agent <-> server (heartbeat ${HEARTBEAT_INTERVAL_MS} ms, keepalive ${KEEPALIVE_INTERVAL_MS}+${KEEPALIVE_TIMEOUT_MS} ms): server ended the stream after ${Math.round(serverDetectedMs)} ms (bound ${SERVER_DETECTION_BOUND_MS}), client's error event after ${Math.round(clientHeardMs)} ms, agent ended its side after ${agentDetectedMs} ms (bound ${AGENT_DETECTION_BOUND_MS}: "${agentClosed.detail}"); after the heal the agent was ready again in ${Math.round(rejoinedMs)} ms and served a request (200) in ${Math.round(servedMs)} ms`);
    expect(serverDetectedMs).toBeLessThan(SERVER_DETECTION_BOUND_MS + SCHEDULING_SLACK_MS);
    expect(clientHeardMs).toBeLessThan(SERVER_DETECTION_BOUND_MS + SCHEDULING_SLACK_MS);
    expect(agentDetectedMs).toBeLessThan(AGENT_DETECTION_BOUND_MS + SCHEDULING_SLACK_MS);
  }, 60_000);
});

/** The agent's "stream to the control plane closed" log records (pino JSON on stderr), oldest first. */
function streamClosedLines(agent: AgentProcess): Array<{ time: number; detail: string }> {
  return agent.stderr().split('\n').filter((line) => line.includes('stream to the control plane closed')).map((line) => JSON.parse(line));
}
