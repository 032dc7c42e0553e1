import { UsageRecord } from '../../control-plane/usage/usage-record.entity';
import { startWithDeployment, waitFor, type TestDeployment, type TestServer, type TestWorkspace } from '../support/test-server';
import { postChat, userChat } from '../support/chat';
import { SseReader } from './support/sse-reader';

/** Figure under test: the client's stream ends with its error event this soon after the kill. */
const TERMINAL_EVENT_BOUND_MS = 1_000;

/**
 * test/integration/agent-failures.test.ts kills the only replica's agent mid-stream and checks
 * the error event and the restarted agent; this one has a second replica and measures: how
 * soon the client hears, and that the next request needs no restart at all.
 */
describe('kill -9 of an agent mid-stream, 2 replicas', () => {
  let test: TestServer;
  let workspace: TestWorkspace;
  let deployment: TestDeployment;

  beforeAll(async () => {
    ({ test, workspace, deployment } = await startWithDeployment({
      // The killed agent stays down for the test's length: the next request can only be the other replica's.
      controlPlane: { localRestartDelayMs: 30_000, localAgentEnv: { WORKER_CPU_TEST_CONTROLS: 'true' } },
      deployment: { minReplicas: 2, maxReplicas: 2 },
    }));
  });

  afterAll(async () => {
    await test?.stop();
  });

  it(`ends the stream with a terminal data: {"error": …} event < ${TERMINAL_EVENT_BOUND_MS} ms after the kill; the next request is a 200 from the other replica`, async () => {
    const chat = (body: Record<string, unknown>) => postChat(deployment.baseUrl, workspace.apiKey, userChat('a long answer please', body));

    const response = await chat({ stream: true, max_tokens: 200, cpu_engine: { tokens_per_second: 20 } });
    expect(response.status).toBe(200);
    const stream = new SseReader(response);
    await stream.until(() => stream.chunks >= 3, 10_000, '3 chunks');
    const { dispatcher, localProvider } = test.server.controlPlane;
    const serving = dispatcher.connections(deployment.id).find((connection) => connection.inFlight > 0)!;
    const other = dispatcher.connections(deployment.id).find((connection) => connection !== serving)!;
    const agent = localProvider!.processOf(serving.replicaId)!;
    const killedAt = performance.now();
    agent.kill('SIGKILL');

    await stream.done;
    const terminal = stream.terminalError;
    expect(terminal).toBeDefined();
    const heardMs = terminal!.event.at - killedAt;
    expect(terminal!.error.message).toMatch(/replica serving this request failed/);
    expect(stream.events.some((event) => event.data === '[DONE]')).toBe(false);

    const next = await chat({ max_tokens: 5 });
    const servedMs = performance.now() - killedAt;
    expect(next.status).toBe(200);
    expect((await next.json()).choices[0].message.content.length).toBeGreaterThan(0);
    // Which replica served each: the usage records (the broken stream is metered as failed, with its tokens).
    const records = test.server.controlPlane.dataSource.getRepository(UsageRecord);
    await waitFor(async () => (await records.countBy({ deploymentId: deployment.id })) === 2, 5_000, 'both usage records');
    const failed = await records.findOneByOrFail({ deploymentId: deployment.id, status: 'failed' });
    const succeeded = await records.findOneByOrFail({ deploymentId: deployment.id, status: 'succeeded' });
    expect(failed.replicaId).toBe(serving.replicaId);
    expect(succeeded.replicaId).toBe(other.replicaId);
    expect(agent.signalCode).toBe('SIGKILL');

    console.info(`[faults] agent kill -9 mid-stream (after ${stream.chunks} chunks): terminal error event ${Math.round(heardMs)} ms after the kill (code ${terminal!.error.code}); next request 200 from the other replica ${Math.round(servedMs)} ms after the kill`);
    expect(heardMs).toBeLessThan(TERMINAL_EVENT_BOUND_MS);
  }, 40_000);
});
