import fs from 'node:fs';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import OpenAI from 'openai';
import { waitFor, deploymentForSuite, type TestWorkspace } from '../support/test-server';
import { startReceiver } from '../webhooks/support/receiver';
import { call, chatLine, fileLines, jsonl, upload, waitForBatch } from '../batches/support/batch-helpers';
import { openForSuite } from '../support/suite';

/** CPU-engine lines that take about `seconds` each. */
const slow = (customId: string, seconds: number) => chatLine(customId, `slow ${customId}`, { max_tokens: 20, cpu_engine: { tokens_per_second: 20 / seconds } });

/**
 * Issue 33, the Batch API's holes as a hostile tenant used them at 4102d34: a file of nested
 * lines froze the server while each batch of it was validated (9.2 s for 100 MB), each batch
 * copied its input into PostgreSQL (~61 MB per batch of one reused file), and deleting a
 * workspace left its batches `in_progress` (and its files stored).
 */
describe('security: batch files', () => {
  const served = deploymentForSuite({
    controlPlane: {
      localAgentEnv: { WORKER_CPU_TEST_CONTROLS: 'true' },
      webhooks: { allowInsecureLoopback: true },
      batches: { pollIntervalMs: 100, sweepIntervalMs: 200, progressIntervalMs: 50 },
    },
  });
  const receiver = openForSuite(() => startReceiver(), (opened) => opened.close());

  it('refuses a file with a line nested past 128 levels when it is uploaded, with a 400 naming the line, and stores nothing', async () => {
    const nested = (depth: number) => JSON.stringify(chatLine('deep', 'x', { stop: 'STOP' })).replace('"STOP"', '['.repeat(depth) + ']'.repeat(depth));
    const form = new FormData();
    form.append('purpose', 'batch');
    form.append('file', new Blob([jsonl([chatLine('fine', 'hi'), chatLine('also-fine', 'hi'), nested(100_000), nested(100_000)]).toString()]), 'nested.jsonl');
    const answer = await call('POST', `${served.deployment.baseUrl}/files`, served.workspace.apiKey, form);
    expect(answer.status).toBe(400);
    expect(answer.json.error).toMatchObject({ type: 'invalid_request_error', code: 'invalid_request', param: 'file', message: expect.stringContaining('line 3 ') });
    expect(answer.json.error.message).toContain('128 levels');
    const [{ count }] = await served.test.server.controlPlane.dataSource.query('SELECT count(*)::int AS count FROM batch_files WHERE workspace_id = $1', [served.workspace.workspaceId]);
    expect(count).toBe(0);
  });

  it('validates a large file in slices: the event loop gets turns mid-file and /healthz keeps answering', async () => {
    // 48 lines of ~400 KB of numbers each (allowed: nesting is shallow). The endpoint refuses
    // every body (max_tokens -1), so nothing runs, but each is parsed in full twice to know it.
    const numbers = new Array(200_000).fill(0);
    const lines = Array.from({ length: 48 }, (_, index) => chatLine(`heavy-${index}`, 'x', { max_tokens: -1, numbers }));
    const fileId = await upload(served.client, jsonl(lines));
    const slices = served.test.server.controlPlane.batchValidator.slices;
    const yieldsBefore = slices.yields;
    const created = await served.client.batches.create({ input_file_id: fileId, endpoint: '/v1/chat/completions', completion_window: '24h' });
    let healthzWhileValidating = 0;
    for (let validating = true; validating;) {
      const health = await fetch(`${served.test.url}/healthz`);
      expect(health.status).toBe(200);
      validating = (await served.client.batches.retrieve(created.id)).status === 'validating';
      if (validating) healthzWhileValidating++;
    }
    const batch = await waitForBatch(served.client, created.id);
    expect(batch).toMatchObject({ status: 'completed', request_counts: { total: 48, completed: 0, failed: 48 } });
    // Structural, not timed: the validation of this one file gave the event loop turns (at 4102d34
    // 500 lines went per turn: these 48 in one), and other requests were answered meanwhile.
    expect(slices.yields - yieldsBefore).toBeGreaterThanOrEqual(2);
    expect(healthzWhileValidating).toBeGreaterThanOrEqual(1);
  });

  it('keeps a batch\'s input in the object store: its lines hold where each body lies, and the runner reads them from there', async () => {
    // 40 lines of ~40 KB of random text (PostgreSQL cannot compress it away): ~1.6 MB of input.
    const lines = Array.from({ length: 40 }, (_, index) => chatLine(`big-${index}`, randomBytes(30_000).toString('base64'), { max_tokens: 1 }));
    const data = jsonl(lines);
    const created = await served.client.batches.create({ input_file_id: await upload(served.client, data), endpoint: '/v1/chat/completions', completion_window: '24h' });
    const batch = await waitForBatch(served.client, created.id, 60_000);
    expect(batch).toMatchObject({ status: 'completed', request_counts: { total: 40, completed: 40, failed: 0 } });
    expect((await fileLines(served.client, batch.output_file_id)).map((line) => line.custom_id)).toEqual(lines.map((line) => line.custom_id));
    const [{ stored }] = await served.test.server.controlPlane.dataSource.query(
      'SELECT coalesce(sum(pg_column_size(l.*)), 0)::int AS stored FROM batch_lines l WHERE batch_id = $1', [batch.id]);
    // Rows of ids, offsets, statuses and one-token answers: a few hundred bytes a line, not the input's 40 KB.
    expect(stored).toBeLessThan(data.length / 20);
  });

  it('keeps the bytes of an input file deleted while its batch runs until the batch ends, then deletes them', async () => {
    const fileId = await upload(served.client, jsonl(Array.from({ length: 6 }, (_, index) => slow(`kept-${index}`, 0.5))));
    const [{ object_key: objectKey }] = await served.test.server.controlPlane.dataSource.query('SELECT object_key FROM batch_files WHERE id = $1', [fileId]);
    const objectPath = path.join(served.test.dataDir, 'objects', served.test.server.controlPlane.managedStore.bucket, objectKey);
    const created = await served.client.batches.create({ input_file_id: fileId, endpoint: '/v1/chat/completions', completion_window: '24h' });
    await waitForBatch(served.client, created.id, 20_000, (current) => current.status === 'in_progress');
    expect(await served.client.files.delete(fileId)).toEqual({ id: fileId, object: 'file', deleted: true });
    expect(await served.client.files.retrieve(fileId).catch((error) => error.status)).toBe(404);
    expect(fs.existsSync(objectPath)).toBe(true);
    const batch = await waitForBatch(served.client, created.id, 30_000);
    expect(batch).toMatchObject({ status: 'completed', request_counts: { total: 6, completed: 6, failed: 0 } });
    await waitFor(() => !fs.existsSync(objectPath), 10_000, 'the deleted input file\'s object to go once its batch ended');
  });

  /** A deployment with a batch running slow lines, a finished batch's output file and a file no batch used, and where their objects are. */
  async function deploymentWithBatches(owner: TestWorkspace) {
    const deployment = await served.test.createDeployment(owner);
    await served.test.waitForReplicas(deployment.id, 1);
    const ownerClient = new OpenAI({ baseURL: deployment.baseUrl, apiKey: owner.apiKey, maxRetries: 0 });
    const finished = await waitForBatch(ownerClient, (await ownerClient.batches.create({
      input_file_id: await upload(ownerClient, jsonl([chatLine('done', 'hi')])), endpoint: '/v1/chat/completions', completion_window: '24h',
    })).id);
    expect(finished.output_file_id).toEqual(expect.any(String));
    await upload(ownerClient, jsonl([chatLine('unused', 'hi')]));
    const running = await ownerClient.batches.create({
      input_file_id: await upload(ownerClient, jsonl(Array.from({ length: 12 }, (_, index) => slow(`run-${index}`, 2)))), endpoint: '/v1/chat/completions', completion_window: '24h',
    });
    await waitFor(async () => (await served.test.server.controlPlane.dataSource.query(
      `SELECT 1 FROM batch_lines WHERE batch_id = $1 AND status = 'running'`, [running.id])).length > 0, 15_000, 'a running line');
    const objects: string[] = (await served.test.server.controlPlane.dataSource.query('SELECT object_key FROM batch_files WHERE deployment_id = $1', [deployment.id]))
      .map((row: { object_key: string }) => path.join(served.test.dataDir, 'objects', served.test.server.controlPlane.managedStore.bucket, row.object_key));
    expect(objects).toHaveLength(4);
    for (const object of objects) expect(fs.existsSync(object)).toBe(true);
    return { deployment, running, objects };
  }

  async function expectCancelledAndGone(owner: TestWorkspace, deploymentId: string, batchId: string, objects: string[]): Promise<void> {
    const batches = served.test.server.controlPlane.batches;
    await waitFor(async () => (await batches.get(owner.workspaceId, batchId)).status === 'cancelled', 20_000, 'the batch to end cancelled');
    const batch = await batches.get(owner.workspaceId, batchId);
    // Ended as a user's cancel ends it: its counts, every line accounted for; no files, which would be deleted at once.
    expect(batch.totalCount).toBe(12);
    expect(batch.completedCount + batch.failedCount).toBe(12);
    expect(batch.failedCount).toBeGreaterThan(0);
    expect(batch.cancelledAt).toEqual(expect.any(Date));
    expect([batch.outputFileId, batch.errorFileId]).toEqual([null, null]);
    await waitFor(() => receiver.at(`/ok/${owner.workspaceId}`).some((delivery) => JSON.parse(delivery.rawBody.toString()).data.id === batchId), 10_000, 'the batch.cancelled delivery');
    const delivery = receiver.at(`/ok/${owner.workspaceId}`).find((received) => JSON.parse(received.rawBody.toString()).data.id === batchId)!;
    expect(JSON.parse(delivery.rawBody.toString())).toMatchObject({ type: 'batch.cancelled', data: { id: batchId, status: 'cancelled' } });
    await waitFor(async () => (await served.test.server.controlPlane.dataSource.query('SELECT id FROM batch_files WHERE deployment_id = $1', [deploymentId])).length === 0,
      10_000, 'the deployment\'s files to be deleted');
    for (const object of objects) expect(fs.existsSync(object)).toBe(false);
  }

  it('deleting a deployment cancels its running batch (as a cancel: lines stopped, batch.cancelled sent) and deletes its files, rows and bytes', async () => {
    const owner = await served.test.createWorkspace();
    await served.test.server.controlPlane.webhooks.service.endpoints.create(owner.workspaceId, `${receiver.base}/ok/${owner.workspaceId}`);
    const { deployment, running, objects } = await deploymentWithBatches(owner);
    await served.test.server.controlPlane.deployments.delete(owner.workspaceId, deployment.id);
    await expectCancelledAndGone(owner, deployment.id, running.id, objects);
  });

  it('deleting a workspace cancels its batches and deletes its files, rows and bytes', async () => {
    const owner = await served.test.createWorkspace();
    await served.test.server.controlPlane.webhooks.service.endpoints.create(owner.workspaceId, `${receiver.base}/ok/${owner.workspaceId}`);
    const { deployment, running, objects } = await deploymentWithBatches(owner);
    await served.test.server.controlPlane.workspaceAdmin.delete(owner.workspaceId);
    await expectCancelledAndGone(owner, deployment.id, running.id, objects);
  });
});
