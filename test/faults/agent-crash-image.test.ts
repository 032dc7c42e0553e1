import { LedgerEntry } from '../../control-plane/billing/ledger-entry.entity';
import { RequestRecord } from '../../control-plane/requests/request-record.entity';
import { UsageRecord } from '../../control-plane/usage/usage-record.entity';
import { WebhookDelivery, WebhookEvent } from '../../control-plane/webhooks/webhook.entities';
import { MediaClient } from '../media/support/media-client';
import { startWithDeployment, waitFor, type TestDeployment, type TestServer, type TestWorkspace } from '../support/test-server';
import { startReceiver } from '../webhooks/support/receiver';

const IMAGE_MODEL = 'black-forest-labs/FLUX.1-schnell';
/** Delays before webhook attempts 2 and 3, and each attempt's timeout: the whole schedule is ~1.8 s. */
const RETRY_SCHEDULE_MS = [100, 200];
const ATTEMPT_TIMEOUT_MS = 500;
/** After the first delivery, wait past every retry the schedule could still make (and a few lease sweeps). */
const QUIET_AFTER_DELIVERY_MS = RETRY_SCHEDULE_MS.reduce((sum, delay) => sum + delay, 0) + 3 * ATTEMPT_TIMEOUT_MS + 1_000;

describe('kill -9 of an agent mid-image (async job with a webhook)', () => {
  let test: TestServer;
  let workspace: TestWorkspace;
  let deployment: TestDeployment;
  let receiver: Awaited<ReturnType<typeof startReceiver>>;

  beforeAll(async () => {
    receiver = await startReceiver();
    ({ test, workspace, deployment } = await startWithDeployment({
      controlPlane: {
        localAgentEnv: { WORKER_CPU_TEST_CONTROLS: 'true' },
        requests: { sweepIntervalMs: 200, leaseMs: 1_000 },
        webhooks: { allowInsecureLoopback: true, retryScheduleMs: RETRY_SCHEDULE_MS, attemptTimeoutMs: ATTEMPT_TIMEOUT_MS, maxAttempts: 3 },
      },
      deployment: { modelId: IMAGE_MODEL },
    }));
  });

  afterAll(async () => {
    await test?.stop();
    await receiver?.close();
  });

  it('fails the record with pod_crash, charges nothing for it, and delivers its request.failed webhook exactly once', async () => {
    const client = new MediaClient(deployment.baseUrl, workspace.apiKey);
    const submitted = await client.post('/images/generations?async=true', {
      model: IMAGE_MODEL, prompt: 'a lighthouse [cpu-engine:delay=20000]', size: '512x512', webhook_url: `${receiver.base}/ok/crash`,
    });
    expect(submitted.status).toBe(202);
    // Running on the agent for real: the agent's progress reached the record.
    const { dispatcher, localProvider, dataSource } = test.server.controlPlane;
    const records = dataSource.getRepository(RequestRecord);
    await waitFor(async () => (await records.findOneByOrFail({ id: submitted.body.id })).progress > 0, 10_000, 'progress from the agent');
    const [connection] = dispatcher.connections(deployment.id);
    const killedAt = performance.now();
    const killedAtWallClock = Date.now();
    localProvider!.processOf(connection.replicaId)!.kill('SIGKILL');

    const record = await client.waitForRecord(submitted.body.id, (candidate) => candidate.status !== 'running', 10_000);
    const failedMs = performance.now() - killedAt;
    expect(record).toMatchObject({ status: 'failed', error_code: 'pod_crash' });
    await waitFor(() => receiver.at('/ok/crash').length === 1, 10_000, 'the request.failed delivery');
    const deliveredMs = receiver.at('/ok/crash')[0].receivedAt - killedAtWallClock;
    await new Promise((resolve) => setTimeout(resolve, QUIET_AFTER_DELIVERY_MS));

    // Exactly once: one event in the outbox, one delivery, one attempt, one POST received.
    const deliveries = receiver.at('/ok/crash');
    expect(deliveries).toHaveLength(1);
    const event = JSON.parse(deliveries[0].rawBody.toString('utf8'));
    expect(event).toMatchObject({ type: 'request.failed', data: { id: submitted.body.id, status: 'failed', error_code: 'pod_crash' } });
    const events = await dataSource.getRepository(WebhookEvent).findBy({ requestId: submitted.body.id });
    expect(events.map((row) => row.type)).toEqual(['request.failed']);
    const rows = await dataSource.getRepository(WebhookDelivery).findBy({ eventId: events[0].id });
    expect(rows).toEqual([expect.objectContaining({ status: 'succeeded', attempts: 1 })]);

    // Costs nothing: the record bills 0 GPU seconds, no usage record (token billing) and no ledger
    // row other than gpu_time exists for the workspace. gpu_time rows meter the replica's hours
    // whatever it runs (docs/api-contract.md, "Money, credit and the ledger"), not this request,
    // so they are not part of the check.
    const stored = await records.findOneByOrFail({ id: submitted.body.id });
    expect(stored.billedGpuSeconds).toBe(0);
    expect(await dataSource.getRepository(UsageRecord).countBy({ workspaceId: workspace.workspaceId })).toBe(0);
    const ledger = await dataSource.getRepository(LedgerEntry).findBy({ workspaceId: workspace.workspaceId });
    expect(ledger.filter((entry) => entry.kind !== 'gpu_time')).toEqual([]);

    console.info(`[faults] agent kill -9 mid-image: record failed (pod_crash) ${Math.round(failedMs)} ms after the kill, request.failed delivered once, ${Math.round(deliveredMs)} ms after the kill (none more in the next ${QUIET_AFTER_DELIVERY_MS} ms); billed 0 s, 0 usage records, 0 non-gpu_time ledger rows`);
  }, 40_000);
});
