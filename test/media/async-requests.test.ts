import sharp from 'sharp';
import { startWithDeployment, waitFor, type TestServer, type TestWorkspace } from '../support/test-server';
import { MediaClient } from './support/media-client';
import { graphqlClient } from '../capacity/support/graphql-client';

const IMAGE_MODEL = 'black-forest-labs/FLUX.1-schnell';

/** Async image jobs: the request record's lifecycle, idempotency, listing, cancel races and workspace isolation. */
describe('async image requests', () => {
  let test: TestServer;
  let workspace: TestWorkspace;
  let deployment: { id: string; slug: string; baseUrl: string };
  let client: MediaClient;

  beforeAll(async () => {
    ({ test, workspace, deployment } = await startWithDeployment({ controlPlane: { localAgentEnv: { WORKER_CPU_TEST_CONTROLS: 'true' } }, deployment: { modelId: IMAGE_MODEL } }));
    client = new MediaClient(deployment.baseUrl, workspace.apiKey);
  });

  afterAll(async () => {
    await test?.stop();
  });

  const generate = (prompt: string, extra: Record<string, unknown> = {}, headers: Record<string, string> = {}) =>
    client.post('/images/generations?async=true', { model: IMAGE_MODEL, prompt, size: '512x512', ...extra }, headers);

  it('acknowledges with 202, runs the job, and serves fresh links only once it succeeded', async () => {
    const submitted = await generate('a quiet harbour', { n: 2 });
    expect(submitted.status).toBe(202);
    expect(submitted.body).toEqual({ id: expect.stringMatching(/^req_[0-9a-f]{24}$/), object: 'inference.request', status: 'queued', modality: 'image', estimated_seconds: expect.any(Number) });
    expect(submitted.body.estimated_seconds).toBeGreaterThanOrEqual(1);
    const record = await client.waitForRecord(submitted.body.id);
    expect(record).toMatchObject({
      id: submitted.body.id, object: 'inference.request', modality: 'image', status: 'succeeded', storage_provider: 'local', output_bucket: 'outputs',
      output_object_key: `${workspace.workspaceId}/${submitted.body.id}/0.png`, error_code: null, error_message: null,
    });
    expect(record.queued_at).toBeLessThanOrEqual(record.started_at);
    expect(record.started_at).toBeLessThanOrEqual(record.completed_at);
    expect(record.output_urls).toHaveLength(2);
    for (const url of record.output_urls) {
      const file = await fetch(url);
      expect(file.status).toBe(200);
      expect((await sharp(Buffer.from(await file.arrayBuffer())).metadata()).width).toBe(512);
    }
    // Links are signed anew on every read, and expire in about an hour.
    const again = (await client.get(`/requests/${submitted.body.id}`)).body;
    const expires = Number(new URL(again.output_urls[0]).searchParams.get('expires'));
    expect(expires - Date.now() / 1000).toBeGreaterThan(3_500);
    expect(expires - Date.now() / 1000).toBeLessThanOrEqual(3_600);
  });

  it('dedupes an Idempotency-Key: same request → same record; different request → 422', async () => {
    const headers = { 'idempotency-key': `key-${Date.now()}` };
    const first = await generate('idempotent', {}, headers);
    const retry = await generate('idempotent', {}, headers);
    expect(first.status).toBe(202);
    expect(retry.status).toBe(202);
    expect(retry.body.id).toBe(first.body.id);
    const conflict = await generate('something else', {}, headers);
    expect(conflict.status).toBe(422);
    expect(conflict.body.error).toMatchObject({ code: 'idempotency_key_reused', param: 'Idempotency-Key' });
    const otherKey = await generate('idempotent', {}, { 'idempotency-key': `other-${Date.now()}` });
    expect(otherKey.body.id).not.toBe(first.body.id);
    await client.waitForRecord(first.body.id);
    await client.waitForRecord(otherKey.body.id);
    expect(await test.server.controlPlane.requestRecords.repository.count({ where: { idempotencyKey: headers['idempotency-key'] } })).toBe(1);
  });

  it('cancels a queued request (200), but not a running or finished one (409); a saturated replica refuses sync calls (429)', async () => {
    const slow = await generate('slow [cpu-engine:delay=2500]');
    await client.waitForRecord(slow.body.id, (record) => record.status === 'running');
    const queued = await generate('waits its turn');
    expect((await client.get(`/requests/${queued.body.id}`)).body.status).toBe('queued');

    const saturated = await client.post('/images/generations', { model: IMAGE_MODEL, prompt: 'now please', size: '512x512' });
    expect(saturated.status).toBe(429);
    expect(saturated.body.error.code).toBe('replica_saturated');
    expect(Number(saturated.headers.get('retry-after'))).toBeGreaterThan(0);

    const canceled = await client.post(`/requests/${queued.body.id}/cancel`, {});
    expect(canceled.status).toBe(200);
    expect(canceled.body).toMatchObject({ id: queued.body.id, status: 'canceled', error_code: null });
    expect(canceled.body.output_urls).toBeUndefined();
    const runningCancel = await client.post(`/requests/${slow.body.id}/cancel`, {});
    expect(runningCancel.status).toBe(409);
    expect(runningCancel.body.error.code).toBe('request_not_cancellable');
    const twice = await client.post(`/requests/${queued.body.id}/cancel`, {});
    expect(twice.status).toBe(409);
    expect((await client.waitForRecord(slow.body.id)).status).toBe('succeeded');
    const finishedCancel = await client.post(`/requests/${slow.body.id}/cancel`, {});
    expect(finishedCancel.status).toBe(409);
    // The canceled record never ran and cost nothing.
    const row = await test.server.controlPlane.requestRecords.find(queued.body.id);
    expect(row).toMatchObject({ status: 'canceled', startedAt: null, billedGpuSeconds: 0 });
  });

  it('over GraphQL (the console): cancelRequest cancels a queued request only, and outputUrls signs links to a succeeded one, for its workspace only', async () => {
    const graphql = graphqlClient(test.url, workspace.apiKey);
    const cancel = 'mutation($id: ID!) { cancelRequest(id: $id) { id status } }';
    const outputs = 'query($id: ID!) { request(id: $id) { status outputUrls } }';
    const slow = await generate('slow [cpu-engine:delay=1500]');
    await client.waitForRecord(slow.body.id, (record) => record.status === 'running');
    const queued = await generate('waits its turn');

    expect((await graphql(cancel, { id: queued.body.id })).data).toEqual({ cancelRequest: { id: queued.body.id, status: 'canceled' } });
    const running = await graphql(cancel, { id: slow.body.id });
    expect(running.errors?.[0]).toMatchObject({ message: `request ${slow.body.id} is running; only queued requests can be canceled`, extensions: { code: 'CONFLICT', param: 'id' } });
    expect((await graphql(outputs, { id: slow.body.id })).data.request.outputUrls).toBeNull();

    await client.waitForRecord(slow.body.id);
    const { data } = await graphql(outputs, { id: slow.body.id });
    expect(data.request.status).toBe('succeeded');
    expect(data.request.outputUrls).toHaveLength(1);
    expect((await fetch(data.request.outputUrls[0])).status).toBe(200);
    expect((await graphql(outputs, { id: queued.body.id })).data.request.outputUrls).toBeNull();

    const unknown = await graphql(cancel, { id: 'req_000000000000000000000000' });
    expect(unknown.errors?.[0].extensions).toMatchObject({ code: 'NOT_FOUND' });
    expect(unknown.errors?.[0].message).toContain('req_000000000000000000000000');
    const outsider = graphqlClient(test.url, (await test.createWorkspace()).apiKey);
    expect((await outsider(outputs, { id: slow.body.id })).errors?.[0].extensions.code).toBe('FORBIDDEN');
    expect((await outsider(cancel, { id: slow.body.id })).errors?.[0].extensions.code).toBe('FORBIDDEN');
  });

  it('lists newest first, filters by status, honours limit, and never carries output_urls', async () => {
    const ids: string[] = [];
    for (let index = 0; index < 3; index++) ids.push((await generate(`listed ${index}`)).body.id);
    for (const id of ids) await client.waitForRecord(id);
    const listed = (await client.get('/requests?limit=3')).body;
    expect(listed.object).toBe('list');
    expect(listed.data.map((record: { id: string }) => record.id)).toEqual([...ids].reverse());
    expect(listed.data.every((record: object) => !('output_urls' in record))).toBe(true);
    const canceled = (await client.get('/requests?status=canceled')).body.data;
    expect(canceled.length).toBeGreaterThanOrEqual(1);
    expect(canceled.every((record: { status: string }) => record.status === 'canceled')).toBe(true);
    const defaults = (await client.get('/requests')).body.data;
    expect(defaults.length).toBeLessThanOrEqual(50);
    expect(defaults.length).toBeGreaterThanOrEqual(6);
  });

  it('a GPU out-of-memory fails the record with vram_exceeded and no charge; sync calls get 502 upstream_error', async () => {
    const submitted = await generate('too big [cpu-engine:vram_exceeded]');
    const record = await client.waitForRecord(submitted.body.id);
    expect(record).toMatchObject({ status: 'failed', error_code: 'vram_exceeded', output_object_key: null });
    expect(record.error_message).toContain('out of memory');
    expect(record.output_urls).toBeUndefined();
    expect((await test.server.controlPlane.requestRecords.find(submitted.body.id))!.billedGpuSeconds).toBe(0);
    const sync = await client.post('/images/generations', { model: IMAGE_MODEL, prompt: 'too big [cpu-engine:vram_exceeded]', size: '512x512' });
    expect(sync.status).toBe(502);
    expect(sync.body.error.code).toBe('upstream_error');
    expect(sync.body.error.message).toContain('vram_exceeded');
  });

  it("keeps workspaces apart: another workspace's record is 403, its list does not show it", async () => {
    const mine = await generate('private');
    const other = await test.createWorkspace();
    const otherDeployment = await test.createDeployment(other, { modelId: IMAGE_MODEL });
    const outsider = new MediaClient(otherDeployment.baseUrl, other.apiKey);
    const peek = await outsider.get(`/requests/${mine.body.id}`);
    expect(peek.status).toBe(403);
    expect(peek.body.error.code).toBe('permission_denied');
    expect((await outsider.post(`/requests/${mine.body.id}/cancel`, {})).status).toBe(403);
    expect((await outsider.get('/requests')).body.data).toEqual([]);
    // Nor can a key reach another workspace's deployment endpoint at all.
    expect((await new MediaClient(deployment.baseUrl, other.apiKey).get('/requests')).status).toBe(404);
    await client.waitForRecord(mine.body.id);
  });

  it('a paused deployment answers 503 no_pod_available, sync and async; a retry of a submission it accepted still gets its record', async () => {
    const paused = await test.createDeployment(workspace, { modelId: IMAGE_MODEL });
    await test.waitForReplicas(paused.id, 1);
    const pausedClient = new MediaClient(paused.baseUrl, workspace.apiKey);
    const headers = { 'idempotency-key': `before-pause-${Date.now()}` };
    const body = { model: IMAGE_MODEL, prompt: 'accepted before the pause', size: '512x512' };
    const accepted = await pausedClient.post('/images/generations?async=true', body, headers);
    expect(accepted.status).toBe(202);
    await test.server.controlPlane.deployments.pause(workspace.workspaceId, paused.id);
    for (const path of ['/images/generations', '/images/generations?async=true']) {
      const response = await pausedClient.post(path, { model: IMAGE_MODEL, prompt: 'x', size: '512x512' });
      expect(response.status).toBe(503);
      expect(response.body.error.code).toBe('no_pod_available');
    }
    const retry = await pausedClient.post('/images/generations?async=true', body, headers);
    expect(retry.status).toBe(202);
    expect(retry.body.id).toBe(accepted.body.id);
    await waitFor(() => test.server.controlPlane.dispatcher.readyReplicas(paused.id) === 0, 10_000, 'replicas released');
  });
});
