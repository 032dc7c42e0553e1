import OpenAI, { toFile } from 'openai';
import type { Page } from 'playwright-core';
import { waitFor, type TestWorkspace } from '../support/test-server';
import { consoleSuite, newPage, screenshot, seriousAccessibilityViolations } from './support/browser';

/**
 * The Batches page against a real server and real agents: batches created through a
 * deployment endpoint with the official `openai` SDK appear live with their progress, link to
 * their files (signed links a browser follows without the key), and can be cancelled.
 */
describe('console: batches', () => {
  const suite = consoleSuite({
    // Per-line engine timing (`cpu_engine` in a line's body) keeps a batch running long enough to watch and cancel.
    controlPlane: { localAgentEnv: { WORKER_CPU_TEST_CONTROLS: 'true' } },
    // CONSOLE_TEST_DIR: a console built elsewhere (vite build --outDir) instead of dist/console.
    gateway: process.env.CONSOLE_TEST_DIR ? { consoleDir: process.env.CONSOLE_TEST_DIR } : {},
  });
  let workspace: TestWorkspace;
  let deployment: { id: string; slug: string; baseUrl: string };
  let client: OpenAI;
  let page: Page;

  const createBatch = async (customIds: string[], body: Record<string, unknown> = {}) => {
    const model = suite.test.server.controlPlane.catalog.defaultChatModel().id;
    const jsonl = customIds.map((customId) => JSON.stringify({
      custom_id: customId, method: 'POST', url: '/v1/chat/completions',
      body: { model, messages: [{ role: 'user', content: `tell me about ${customId}` }], max_tokens: 4, ...(customId.startsWith('bad') ? { max_tokens: -1 } : body) },
    })).join('\n');
    const file = await client.files.create({ file: await toFile(Buffer.from(jsonl), 'console.jsonl'), purpose: 'batch' });
    return await client.batches.create({ input_file_id: file.id, endpoint: '/v1/chat/completions', completion_window: '24h' });
  };

  beforeAll(async () => {
    workspace = await suite.test.createWorkspace();
    deployment = await suite.test.createDeployment(workspace);
    client = new OpenAI({ baseURL: deployment.baseUrl, apiKey: workspace.apiKey, maxRetries: 0 });
    await suite.test.waitForReplicas(deployment.id, 1);
    page = await newPage(suite.browser, suite.test.url);
    await page.goto('/console/batches');
    await page.getByLabel('Workspace API key').fill(workspace.apiKey);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { level: 1, name: 'Batches' }).waitFor();
  });

  it('shows a batch created with the SDK live, its progress moving to completed, with links that download its files', async () => {
    await page.getByText('No batches in this workspace yet.').waitFor();
    expect(await seriousAccessibilityViolations(page)).toEqual([]);

    // Lines hold a slot for a while, so the progress is seen between 0 and the end.
    const batch = await createBatch(['alpha', 'beta', 'gamma', 'delta', 'bad-line'], { cpu_engine: { ttft_ms: 1_200 } });
    const row = page.getByRole('row').filter({ hasText: batch.id });
    await row.waitFor();
    const progress = row.getByRole('progressbar', { name: `Progress of ${batch.id}` });
    await progress.waitFor();
    expect(await progress.getAttribute('max')).toBe('5');
    // The refused line is counted at once; the others as they finish.
    await waitFor(async () => {
      const value = Number(await progress.getAttribute('value'));
      return value >= 1 && value < 5;
    }, 15_000, 'progress between the first line and the last');
    await row.getByText('in_progress', { exact: true }).waitFor();

    await row.getByText('completed', { exact: true }).waitFor({ timeout: 30_000 });
    await row.getByText('5 / 5').waitFor();
    await row.getByText('1 failed').waitFor();
    expect(await progress.getAttribute('value')).toBe('5');

    // Links arrive with the files; a browser follows them with no key.
    const output = row.getByRole('link', { name: `Output file of ${batch.id}` });
    const errors = row.getByRole('link', { name: `Errors file of ${batch.id}` });
    const input = row.getByRole('link', { name: `Input file of ${batch.id}` });
    await output.waitFor();
    const fetched = async (link: typeof output) => {
      const response = await page.request.get((await link.getAttribute('href'))!, { headers: {} });
      expect(response.status()).toBe(200);
      return await response.text();
    };
    const outputLines = (await fetched(output)).trim().split('\n').map((line) => JSON.parse(line));
    expect(outputLines.map((line) => line.custom_id).sort()).toEqual(['alpha', 'beta', 'delta', 'gamma']);
    expect((await fetched(errors)).trim().split('\n').map((line) => JSON.parse(line).custom_id)).toEqual(['bad-line']);
    expect(await fetched(input)).toContain('"custom_id":"alpha"');
    // What the page links to is exactly what the REST API serves with the key.
    const final = await client.batches.retrieve(batch.id);
    expect(await fetched(output)).toBe(await (await client.files.content(final.output_file_id!)).text());
    // A click downloads the file (same origin: the `download` attribute applies).
    const [download] = await Promise.all([page.waitForEvent('download'), output.click()]);
    expect(download.suggestedFilename()).toBe(`${final.output_file_id}.jsonl`);

    expect(await seriousAccessibilityViolations(page)).toEqual([]);
    await screenshot(page, 'batches');
  });

  it('fits 1440 px: each Cancel button shows "Cancel" and is named for its batch (the id is not in the visible label)', async () => {
    const batch = await createBatch(['wide-1', 'wide-2', 'wide-3'], { cpu_engine: { ttft_ms: 1_500 } });
    await page.setViewportSize({ width: 1440, height: 900 });
    try {
      const row = page.getByRole('row').filter({ hasText: batch.id });
      const cancel = row.getByRole('button', { name: `Cancel ${batch.id}` });
      await cancel.waitFor({ timeout: 20_000 });
      expect(await cancel.textContent()).toBe('Cancel');
      // Neither the page nor the table's own box scrolls sideways.
      const overflow = await page.evaluate(() => {
        const box = document.querySelector('table.batches')!.parentElement!;
        return { page: document.documentElement.scrollWidth - document.documentElement.clientWidth, table: box.scrollWidth - box.clientWidth };
      });
      expect(overflow).toEqual({ page: 0, table: 0 });
      await cancel.click();
      const question = row.getByRole('group', { name: new RegExp(`\\(Cancel ${batch.id}\\)$`) });
      await question.getByRole('button', { name: `Yes, cancel ${batch.id}` }).waitFor();
      expect(await question.getByRole('button', { name: `Yes, cancel ${batch.id}` }).textContent()).toBe('Yes, cancel');
      expect(await seriousAccessibilityViolations(page)).toEqual([]);
      await screenshot(page, 'batches-1440');
      await question.getByRole('button', { name: `Yes, cancel ${batch.id}` }).click();
      await row.getByText('cancelled', { exact: true }).waitFor({ timeout: 20_000 });
    } finally {
      await page.setViewportSize({ width: 1280, height: 860 });
    }
  });

  it('cancels an in-progress batch from the page after confirming; the deployment filter keeps it', async () => {
    const ids = Array.from({ length: 10 }, (_, index) => `slow-${index}`);
    const batch = await createBatch(ids, { cpu_engine: { ttft_ms: 2_000 } });
    const row = page.getByRole('row').filter({ hasText: batch.id });
    await row.getByText('in_progress', { exact: true }).waitFor({ timeout: 20_000 });

    await page.getByLabel('Deployment').selectOption(deployment.id);
    expect(new URL(page.url()).searchParams.get('deployment')).toBe(deployment.id);
    await row.waitFor();

    await row.getByRole('button', { name: `Cancel ${batch.id}` }).click();
    await row.getByRole('button', { name: `Yes, cancel ${batch.id}` }).click();
    await row.getByText(/^cancell(ing|ed)$/).waitFor();
    expect((await client.batches.retrieve(batch.id)).status).toMatch(/^cancell(ing|ed)$/);
    await row.getByText('cancelled', { exact: true }).waitFor({ timeout: 20_000 });
    expect(await row.getByRole('button', { name: `Cancel ${batch.id}` }).count()).toBe(0);
    await row.getByRole('link', { name: `Errors file of ${batch.id}` }).waitFor();

    // The deployment page links here, filtered to it.
    await page.goto(`/console/deployments/${deployment.id}`);
    await page.getByRole('link', { name: 'Batches on this deployment' }).click();
    await page.getByRole('heading', { level: 1, name: 'Batches' }).waitFor();
    expect(await page.getByLabel('Deployment').inputValue()).toBe(deployment.id);
    await page.getByRole('row').filter({ hasText: batch.id }).waitFor();
  });
});
