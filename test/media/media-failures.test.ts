import { openDatabase } from '../../control-plane/data-source';
import { restartForSuite, startWithDeployment, type TestServer, type TestWorkspace } from '../support/test-server';
import { MediaClient } from './support/media-client';

const IMAGE_MODEL = 'black-forest-labs/FLUX.1-schnell';
const TEST_CONTROLS = { WORKER_CPU_TEST_CONTROLS: 'true' };

/** Every accepted request ends: deadlines, sync budgets, dead agents, dead servers, restarts. */
describe('media jobs that do not finish normally', () => {
  let test: TestServer;
  let workspace: TestWorkspace;
  let client: MediaClient;
  let deployment: { id: string; slug: string; baseUrl: string };

  beforeAll(async () => {
    ({ test, workspace, deployment } = await startWithDeployment({
      controlPlane: {
        localAgentEnv: TEST_CONTROLS,
        // Budgets of a few seconds, not one: a quick image must fit in them on a loaded machine.
        // The slow prompts take 60 s, so a timeout stays far from what it cuts.
        requests: { imageTimeoutMs: 4_000, syncImageBudgetMs: 3_000, sweepIntervalMs: 200, leaseMs: 1_000 },
      },
      deployment: { modelId: IMAGE_MODEL },
    }));
    client = new MediaClient(deployment.baseUrl, workspace.apiKey);
  });

  afterAll(async () => {
    await test?.stop();
  });

  it('a sync call past its budget gets 504, its job is canceled and its record fails with model_timeout', async () => {
    const startedAt = Date.now();
    const response = await client.post('/images/generations', { model: IMAGE_MODEL, prompt: 'slow [cpu-engine:delay=60000]', size: '512x512' });
    expect(response.status).toBe(504);
    expect(response.body.error.code).toBe('image_generation_timeout');
    expect(Date.now() - startedAt).toBeLessThan(20_000);
    const [record] = (await client.get('/requests?limit=1')).body.data;
    expect(record).toMatchObject({ status: 'failed', error_code: 'model_timeout' });
    // The agent stopped the job: the replica takes the next call at once.
    const next = await client.post('/images/generations', { model: IMAGE_MODEL, prompt: 'quick', size: '512x512' });
    expect(next.status).toBe(200);
  });

  it('an async job past the model timeout fails with model_timeout', async () => {
    const submitted = await client.post('/images/generations?async=true', { model: IMAGE_MODEL, prompt: 'slower [cpu-engine:delay=60000]', size: '512x512' });
    const record = await client.waitForRecord(submitted.body.id);
    expect(record).toMatchObject({ status: 'failed', error_code: 'model_timeout' });
    // Cut at the 4 s model timeout (and the 200 ms sweep), far short of the job's 60 s.
    expect(record.completed_at - record.started_at).toBeLessThanOrEqual(9);
  });

  it('an agent killed mid-job fails the record with pod_crash, and the restarted agent serves again', async () => {
    const submitted = await client.post('/images/generations?async=true', { model: IMAGE_MODEL, prompt: 'fatal [cpu-engine:crash]', size: '512x512' });
    const record = await client.waitForRecord(submitted.body.id);
    expect(record).toMatchObject({ status: 'failed', error_code: 'pod_crash' });
    await test.waitForReplicas(deployment.id, 1);
    const after = await client.post('/images/generations?async=true', { model: IMAGE_MODEL, prompt: 'alive again', size: '512x512' });
    expect((await client.waitForRecord(after.body.id)).status).toBe('succeeded');
  });

  it('a running record whose server stopped renewing its lease fails with pod_crash', async () => {
    const records = test.server.controlPlane.requestRecords;
    const submitted = await client.post('/images/generations?async=true', { model: IMAGE_MODEL, prompt: 'orphan', size: '512x512' });
    await client.waitForRecord(submitted.body.id);
    // Stand in for a server that died mid-job: a running record owned by nobody alive.
    await records.repository.update({ id: submitted.body.id }, {
      status: 'running', leaseOwner: 'a-server-that-died', leaseExpiresAt: new Date(Date.now() - 1_000), completedAt: null,
      deadlineAt: new Date(Date.now() + 60_000),
    });
    const record = await client.waitForRecord(submitted.body.id, (candidate) => candidate.status !== 'running', 5_000);
    expect(record).toMatchObject({ status: 'failed', error_code: 'pod_crash' });
  });

  it('a record left queued past the queue limit fails instead of waiting forever', async () => {
    const records = test.server.controlPlane.requestRecords;
    const submitted = await client.post('/images/generations?async=true', { model: IMAGE_MODEL, prompt: 'aged', size: '512x512' });
    await client.waitForRecord(submitted.body.id);
    await records.repository.update({ id: submitted.body.id }, { status: 'queued', queuedAt: new Date(Date.now() - 2 * 3_600_000), completedAt: null, startedAt: null });
    const record = await client.waitForRecord(submitted.body.id, (candidate) => candidate.status === 'failed', 5_000);
    expect(record.error_code).toBe('model_timeout');
    expect(record.error_message).toContain('no replica took the job');
  });
});

describe('a server restart with queued work', () => {
  const restart = restartForSuite();

  it('runs every queued record exactly once after the restart; nothing is lost', async () => {
    // A drain long enough for the running job to finish even on a loaded machine.
    const agentEnv = { ...TEST_CONTROLS, WORKER_DRAIN_TIMEOUT_MS: '30000' };
    const { test: first, workspace, deployment } = await restart.start({ controlPlane: { localAgentEnv: agentEnv, requests: { sweepIntervalMs: 200 } }, deployment: { modelId: IMAGE_MODEL } });
    const client = new MediaClient(deployment.baseUrl, workspace.apiKey);
    const slow = await client.post('/images/generations?async=true', { model: IMAGE_MODEL, prompt: 'holds the replica [cpu-engine:delay=1200]', size: '512x512' });
    await client.waitForRecord(slow.body.id, (record) => record.status === 'running');
    const queued: string[] = [];
    for (let index = 0; index < 4; index++) {
      queued.push((await client.post('/images/generations?async=true', { model: IMAGE_MODEL, prompt: `queued ${index}`, size: '512x512' })).body.id);
    }
    // Shutdown drains the agent: the running job finishes; the queued ones stay queued.
    await restart.stopFirst();
    const records = await (async () => {
      const dataSource = await openDatabase(first.databaseUrl);
      try {
        return await dataSource.query(`SELECT id, status FROM request_records ORDER BY queued_at`);
      } finally {
        await dataSource.destroy();
      }
    })();
    expect(records.find((record: { id: string }) => record.id === slow.body.id).status).toBe('succeeded');
    expect(records.filter((record: { status: string }) => record.status === 'queued').map((record: { id: string }) => record.id).sort()).toEqual([...queued].sort());

    const { test: second, baseUrl } = await restart.startSecond({ controlPlane: { localAgentEnv: agentEnv, requests: { sweepIntervalMs: 200 } } });
    const restarted = new MediaClient(baseUrl, workspace.apiKey);
    for (const id of queued) {
      const record = await restarted.waitForRecord(id);
      expect(record.status).toBe('succeeded');
      expect(record.output_urls).toHaveLength(1);
      expect((await fetch(record.output_urls[0])).status).toBe(200);
    }
    // Each ran once: started once, on one replica of the new server, with one output.
    const rows = await second.server.controlPlane.requestRecords.repository.findBy({ status: 'succeeded' });
    expect(rows).toHaveLength(5);
    const replicas = new Set((await second.server.controlPlane.replicas.list(deployment.id)).map((replica) => replica.id));
    for (const id of queued) expect(replicas.has(rows.find((row) => row.id === id)!.replicaId!)).toBe(true);
    expect(rows.every((row) => row.outputKeys.length === 1)).toBe(true);
  });
});
