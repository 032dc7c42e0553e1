import OpenAI from 'openai';
import { deploymentForSuite, restartForSuite, waitFor } from '../support/test-server';
import { chatLine, fileLines, jsonl, upload, waitForBatch } from './support/batch-helpers';

const FAST_BATCHES = { pollIntervalMs: 100, sweepIntervalMs: 200, progressIntervalMs: 50, lineLeaseMs: 1_500 };
const slow = (customId: string, seconds: number) => chatLine(customId, `slow ${customId}`, { max_tokens: 20, cpu_engine: { tokens_per_second: 20 / seconds } });

/** A batch across the life of its servers: a restart, a server that died holding lines, a paused deployment, the window passing. */
describe('batches: lifecycle', () => {
  describe('a restart', () => {
    const restart = restartForSuite();

    it('survives a server restart: lines that ran are kept, the rest run on the next server, every custom_id answered once', async () => {
      const agentEnv = { WORKER_CPU_TEST_CONTROLS: 'true' };
      const { workspace, client } = await restart.start({ controlPlane: { localAgentEnv: agentEnv, localMaxConcurrency: 2, batches: FAST_BATCHES } });
      const lines = Array.from({ length: 10 }, (_, index) => slow(`r-${index}`, 0.4));
      const created = await client.batches.create({ input_file_id: await upload(client, jsonl(lines)), endpoint: '/v1/chat/completions', completion_window: '24h' });
      await waitForBatch(client, created.id, 10_000, (batch) => (batch.request_counts?.completed ?? 0) >= 2);
      // A graceful stop: no line starts any more, running ones finish on their draining agent.
      await restart.stopFirst();
      const { test: second, baseUrl } = await restart.startSecond({ controlPlane: { localAgentEnv: agentEnv, batches: FAST_BATCHES } });
      const restarted = new OpenAI({ baseURL: baseUrl, apiKey: workspace.apiKey, maxRetries: 0 });
      const batch = await waitForBatch(restarted, created.id, 30_000);
      expect(batch).toMatchObject({ status: 'completed', request_counts: { total: 10, completed: 10, failed: 0 } });
      expect((await fileLines(restarted, batch.output_file_id)).map((line) => line.custom_id)).toEqual(lines.map((line) => line.custom_id));
      const attempts: Array<{ attempts: number }> = await second.server.controlPlane.dataSource.query('SELECT attempts FROM batch_lines WHERE batch_id = $1', [batch.id]);
      expect(attempts.every((row) => row.attempts === 1)).toBe(true);
    }, 90_000);
  });

  describe('paused, and a dead server', () => {
    const served = deploymentForSuite({ controlPlane: { batches: FAST_BATCHES } });

    it('holds the batches of a paused deployment, and re-queues the lines a dead server held (failing those already run twice)', async () => {
      const controlPlane = served.test.server.controlPlane;
      await controlPlane.deployments.pause(served.workspace.workspaceId, served.deployment.id);
      await waitFor(() => controlPlane.dispatcher.readyReplicas(served.deployment.id) === 0, 10_000, 'the paused deployment\'s replicas gone');
      const lines = Array.from({ length: 6 }, (_, index) => chatLine(`p-${index}`, `held ${index}`));
      const created = await served.client.batches.create({ input_file_id: await upload(served.client, jsonl(lines)), endpoint: '/v1/chat/completions', completion_window: '24h' });
      const held = await waitForBatch(served.client, created.id, 5_000, (batch) => batch.status !== 'validating');
      expect(held.status).toBe('in_progress');
      await new Promise((resolve) => setTimeout(resolve, 500));
      expect((await served.client.batches.retrieve(created.id)).request_counts).toEqual({ total: 6, completed: 0, failed: 0 });
      // A server that died mid-line: two lines claimed under leases that lapsed, one of them on its second run.
      await controlPlane.dataSource.query(`
        UPDATE batch_lines SET status = 'running', claimed_by = 'dead-server', lease_expires_at = clock_timestamp() - interval '1 second',
          attempts = CASE WHEN line_index = 1 THEN 2 ELSE 1 END
        WHERE batch_id = $1 AND line_index IN (1, 4)`, [created.id]);
      await controlPlane.deployments.resume(served.workspace.workspaceId, served.deployment.id);
      const batch = await waitForBatch(served.client, created.id, 30_000);
      expect(batch).toMatchObject({ status: 'completed', request_counts: { total: 6, completed: 5, failed: 1 } });
      expect((await fileLines(served.client, batch.output_file_id)).map((line) => line.custom_id)).toEqual(['p-0', 'p-2', 'p-3', 'p-4', 'p-5']);
      expect(await fileLines(served.client, batch.error_file_id)).toEqual([expect.objectContaining({ custom_id: 'p-1', response: null, error: expect.objectContaining({ code: 'replica_lost' }) })]);
    }, 60_000);
  });

  describe('a short completion window', () => {
    const served = deploymentForSuite({
        controlPlane: { localAgentEnv: { WORKER_CPU_TEST_CONTROLS: 'true' }, batches: { ...FAST_BATCHES, completionWindowMs: 3_000 } },
      });

    it('ends expired when the window passes: finished lines in the output, the unfinished ones in the error file as batch_expired', async () => {
      const fast = Array.from({ length: 3 }, (_, index) => chatLine(`fast-${index}`, `quick ${index}`));
      const slowLines = Array.from({ length: 6 }, (_, index) => slow(`slow-${index}`, 5));
      const created = await served.client.batches.create({ input_file_id: await upload(served.client, jsonl([...fast, ...slowLines])), endpoint: '/v1/chat/completions', completion_window: '24h' });
      expect(created.expires_at! - created.created_at).toBe(3);
      const batch = await waitForBatch(served.client, created.id, 15_000);
      expect(batch.status).toBe('expired');
      expect(batch.expired_at).toEqual(expect.any(Number));
      expect(batch.request_counts).toEqual({ total: 9, completed: 3, failed: 6 });
      expect((await fileLines(served.client, batch.output_file_id)).map((line) => line.custom_id)).toEqual(fast.map((line) => line.custom_id));
      const errors = await fileLines(served.client, batch.error_file_id);
      expect(errors.map((line) => [line.custom_id, line.response, line.error.code])).toEqual(slowLines.map((line) => [line.custom_id, null, 'batch_expired']));
    }, 30_000);
  });
});
