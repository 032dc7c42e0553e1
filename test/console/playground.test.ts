import type { Page } from 'playwright-core';
import { waitFor, type TestWorkspace } from '../support/test-server';
import { consoleSuite, newPage, screenshot, seriousAccessibilityViolations, signIn } from './support/browser';

const IMAGE_MODEL = 'black-forest-labs/FLUX.1-schnell';

/**
 * The playground against a real server and agents: a chat streams in as the key chosen on the
 * page (its usage is that key's), tools are edited as JSON and their calls answered by hand,
 * a JSON schema shapes the answer, bad JSON is refused beside its field, and an image deployment
 * draws an image.
 */
describe('console: playground', () => {
  // 40 tokens a second: an answer streams for a while, so the page is seen mid-answer.
  const suite = consoleSuite({ controlPlane: { localAgentEnv: { WORKER_CPU_TOKENS_PER_SECOND: '40' } } });
  let workspace: TestWorkspace;
  let chatDeployment: { id: string; slug: string };
  let imageDeployment: { id: string; slug: string };
  let playgroundKeyId: string;
  let page: Page;

  beforeAll(async () => {
    workspace = await suite.test.createWorkspace();
    playgroundKeyId = (await suite.test.server.controlPlane.apiKeys.create(workspace.workspaceId, 'playground key')).apiKey.id;
    chatDeployment = await suite.test.createDeployment(workspace);
    imageDeployment = await suite.test.createDeployment(workspace, { modelId: IMAGE_MODEL });
    await suite.test.waitForReplicas(chatDeployment.id, 1);
    await suite.test.waitForReplicas(imageDeployment.id, 1, 60_000);
    page = await newPage(suite.browser, suite.test.url);
    await signIn(page, workspace.apiKey);
  });

  const usageOf = async (keyId: string) => (await suite.test.server.controlPlane.billing.usage(
    workspace.workspaceId, new Date(Date.now() - 3_600_000), new Date(Date.now() + 60_000), 'api_key')).find((row) => row.key === keyId);

  async function send(text: string): Promise<void> {
    await page.getByLabel('Message', { exact: true }).fill(text);
    await page.getByRole('button', { name: 'Send', exact: true }).click();
  }

  it('streams a chat answer as the chosen key, with tools answered by hand and a JSON schema', async () => {
    await page.goto(`/console/deployments/${chatDeployment.id}`);
    await page.getByRole('link', { name: 'Try it in the playground' }).click();
    await page.getByRole('heading', { level: 1, name: 'Playground' }).waitFor();
    expect(await page.getByLabel('Deployment').inputValue()).toBe(chatDeployment.id);
    await page.getByLabel('API key').selectOption({ label: 'playground key (mk-' + (await keyPrefix(playgroundKeyId)) + '…)' });

    await page.getByText('System prompt, tools, structured output and sampling').click();
    await page.getByLabel('Max tokens').fill('48');
    await send('Hello there');
    // Mid-answer: text on the page before the answer ends.
    await page.getByTestId('streaming-answer').filter({ hasText: /\w+/ }).waitFor();
    const end = page.getByTestId('turn-end').last();
    await end.waitFor({ timeout: 20_000 });
    expect(await end.textContent()).toMatch(/^(stop|length) · \d+ prompt \+ \d+ completion tokens · req_/);
    // Billed and recorded as the chosen key, not the one the console signed in with.
    await waitFor(async () => (await usageOf(playgroundKeyId))?.requests === 1, 10_000, 'the playground key\'s usage record');
    expect(await usageOf(workspace.apiKeyId)).toBeUndefined();

    // Tools: the example, a required call, the result typed in, the final answer.
    await page.getByRole('button', { name: 'Clear the conversation' }).click();
    await page.getByRole('button', { name: 'Start from an example' }).first().click();
    await page.getByLabel('Tool choice').selectOption('required');
    await send('What is the weather in Paris?');
    const results = page.getByRole('form', { name: 'Tool results' });
    await results.waitFor({ timeout: 20_000 });
    await page.getByRole('list', { name: 'Tool calls' }).getByText(/^get_weather\(\{"city":/).waitFor();
    expect(await page.getByTestId('turn-end').last().textContent()).toMatch(/^tool_calls/);
    await results.getByLabel(/^Result of get_weather/).fill('{"celsius": 21}');
    await page.getByLabel('Tool choice').selectOption('auto');
    await results.getByRole('button', { name: 'Send tool results' }).click();
    await page.getByTestId('turn-tool').waitFor();
    await waitFor(async () => /^stop/.test(await page.getByTestId('turn-end').last().textContent() ?? ''), 20_000, 'the answer after the tool result');

    // Bad tools JSON: refused beside the field, nothing sent.
    const turns = await page.getByTestId('turn-end').count();
    await page.getByLabel('Tools (JSON, the Chat Completions tools array)').fill('[{"type": "function"');
    await send('Again?');
    const toolsError = page.locator('#playground-tools-error');
    await toolsError.filter({ hasText: 'tools is not valid JSON' }).waitFor();
    expect(await page.getByLabel('Tools (JSON, the Chat Completions tools array)').getAttribute('aria-invalid')).toBe('true');
    expect(await page.getByTestId('turn-end').count()).toBe(turns);
    expect(await seriousAccessibilityViolations(page)).toEqual([]);

    // Structured output: the answer follows the schema, shown as JSON.
    await page.getByLabel('Tools (JSON, the Chat Completions tools array)').fill('');
    await page.getByRole('button', { name: 'Clear the conversation' }).click();
    await page.getByRole('button', { name: 'Start from an example' }).last().click();
    await send('The weather in Paris, as JSON');
    await page.getByTestId('turn-end').last().waitFor({ timeout: 20_000 });
    const json = JSON.parse((await page.getByTestId('turn-assistant').last().locator('pre').textContent())!);
    expect(Object.keys(json).sort()).toEqual(['celsius', 'city']);
    expect(await seriousAccessibilityViolations(page)).toEqual([]);
    await screenshot(page, 'playground');
  });

  it('an image deployment draws an image, shown on the page', async () => {
    await page.goto(`/console/playground?deployment=${imageDeployment.id}`);
    await page.getByLabel('Prompt').fill('a red lighthouse at dusk');
    await page.getByLabel('Size').selectOption('512x512');
    await page.getByRole('button', { name: 'Generate' }).click();
    const image = page.getByRole('img', { name: 'Generated: a red lighthouse at dusk' });
    await image.waitFor({ timeout: 30_000 });
    await waitFor(async () => (await image.evaluate((element: HTMLImageElement) => element.complete && element.naturalWidth)) === 512, 10_000, 'the image to load');
    expect(await seriousAccessibilityViolations(page)).toEqual([]);
    await screenshot(page, 'playground-image');
  });

  async function keyPrefix(keyId: string): Promise<string> {
    const key = (await suite.test.server.controlPlane.apiKeys.list(workspace.workspaceId)).find((each) => each.id === keyId)!;
    return key.displayPrefix.slice(3);
  }
});
