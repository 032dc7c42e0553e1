import OpenAI from 'openai';
import { waitFor } from '../support/test-server';
import { consoleSuite, newPage, seriousAccessibilityViolations } from './support/browser';

const MODEL = 'meta-llama/Llama-3.1-8B-Instruct';

/**
 * The first journey as one story, the way a new user takes it: sign in with the one-time link →
 * create a text deployment from the catalog → watch it turn Running live → create a key and read
 * it once → call the deployment with the openai SDK → see the usage appear.
 */
describe('console: the first journey', () => {
  const suite = consoleSuite({ controlPlane: { localModelDownloadMs: 1_000 } });

  it('link → catalog → Running → key shown once → SDK call → usage', async () => {
    const workspace = await suite.test.createWorkspace();
    const { token } = await suite.test.server.controlPlane.signInLinks.issue(workspace.workspaceId);
    const page = await newPage(suite.browser, suite.test.url);
    await page.goto(`/console/#sign-in=${token}`);
    const nav = page.getByRole('navigation', { name: 'Main' });
    await nav.waitFor();

    await nav.getByRole('link', { name: 'Catalog' }).click();
    const row = page.getByRole('row').filter({ hasText: MODEL });
    await row.getByRole('button', { name: /^Deploy / }).click();
    await page.getByRole('heading', { name: /Create a deployment of/, level: 2 }).waitFor();
    await page.getByLabel('Price cap per replica-hour (USD)').fill('1.5');
    await page.getByRole('button', { name: 'Create deployment' }).click();
    await page.waitForURL(/\/console\/deployments\/dep_/);
    await page.evaluate(() => { (window as unknown as { stillThisPage: boolean }).stillThisPage = true; });
    await page.getByRole('status', { name: 'Status: Running' }).waitFor({ timeout: 30_000 });
    expect(await page.evaluate(() => (window as unknown as { stillThisPage?: boolean }).stillThisPage)).toBe(true);
    const baseUrl = (await page.getByTestId('base-url').textContent())!;

    await nav.getByRole('link', { name: 'API keys' }).click();
    await page.getByLabel('Name').fill('journey key');
    await page.getByRole('button', { name: 'Create key' }).click();
    const shown = page.getByRole('region', { name: 'Your new key journey key' });
    await shown.getByText('you will not see this key again').waitFor();
    const apiKey = (await shown.getByTestId('new-key-plaintext').textContent())!;
    expect(apiKey).toMatch(/^mk-/);
    expect(await seriousAccessibilityViolations(page)).toEqual([]);
    // Read once: away and back, the plaintext is gone from the page.
    await nav.getByRole('link', { name: 'Deployments' }).click();
    await nav.getByRole('link', { name: 'API keys' }).click();
    await page.getByRole('row').filter({ hasText: 'journey key' }).waitFor();
    expect(await page.content()).not.toContain(apiKey);

    const client = new OpenAI({ baseURL: baseUrl, apiKey });
    const answer = await client.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'Hello from the journey' }], max_tokens: 8 });
    const tokens = answer.usage!.total_tokens;

    await nav.getByRole('link', { name: 'Usage and billing' }).click();
    const report = page.getByRole('region', { name: /^Cost and tokens/ });
    await waitFor(async () => {
      const cells = await report.getByRole('row', { name: new RegExp(`^${new Date().toISOString().slice(0, 10)}`) }).getByRole('cell').allTextContents();
      if (cells[0] === '1' && cells[3] === String(tokens)) return true;
      await page.getByRole('button', { name: 'Refresh', exact: true }).click();
      await page.waitForTimeout(200);
      return false;
    }, 15_000, 'the call in today\'s usage');
  });
});
