import OpenAI from 'openai';
import type { Browser, Page } from 'playwright-core';
import { verifyWebhookSignature } from '../../control-plane/webhooks/webhook-signature';
import { MediaClient } from '../media/support/media-client';
import { startTestServer, waitFor, type TestServer, type TestWorkspace } from '../support/test-server';
import { startReceiver } from '../webhooks/support/receiver';
import { launchBrowser, newPage, screenshot, seriousAccessibilityViolations } from './support/browser';

const IMAGE_MODEL = 'black-forest-labs/FLUX.1-schnell';

/** The harness's signIn, landing on `path` rather than the deployments page (not under test here). */
async function signInAt(page: Page, apiKey: string, path: string): Promise<void> {
  await page.goto(path);
  await page.getByLabel('Workspace API key').fill(apiKey);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('navigation', { name: 'Main' }).waitFor();
}

/**
 * The console's API keys, requests and webhooks pages in a real Chromium against a real server,
 * real agents (the built-in CPU engine renders the images) and a real local webhook receiver.
 */
describe('console: API keys, requests and webhooks', () => {
  let test: TestServer;
  let browser: Browser;
  let receiver: Awaited<ReturnType<typeof startReceiver>>;
  let workspace: TestWorkspace;
  let textDeployment: { id: string; slug: string; baseUrl: string };
  let imageDeployment: { id: string; slug: string; baseUrl: string };
  let media: MediaClient;
  let page: Page;

  beforeAll(async () => {
    receiver = await startReceiver();
    test = await startTestServer({
      controlPlane: {
        localAgentEnv: { WORKER_CPU_TEST_CONTROLS: 'true' },
        // Loopback receivers over plain HTTP (as test/webhooks does); an endpoint is disabled after 2 failed deliveries.
        webhooks: { allowInsecureLoopback: true, retryScheduleMs: [50, 100], attemptTimeoutMs: 1_000, autoDisableAfter: 2 },
      },
    });
    browser = await launchBrowser();
    workspace = await test.createWorkspace();
    textDeployment = await test.createDeployment(workspace);
    imageDeployment = await test.createDeployment(workspace, { modelId: IMAGE_MODEL });
    media = new MediaClient(imageDeployment.baseUrl, workspace.apiKey);
    await test.waitForReplicas(textDeployment.id, 1);
    await test.waitForReplicas(imageDeployment.id, 1);
    page = await newPage(browser, test.url);
    await signInAt(page, workspace.apiKey, '/console/keys');
  });

  afterAll(async () => {
    await browser?.close();
    await test?.stop();
    await receiver?.close();
  });

  const chat = (apiKey: string) => new OpenAI({ baseURL: textDeployment.baseUrl, apiKey, maxRetries: 0 }).chat.completions
    .create({ model: test.server.controlPlane.catalog.defaultChatModel().id, messages: [{ role: 'user', content: 'hello' }], max_tokens: 8 })
    .withResponse();
  const go = async (link: string) => {
    await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: link }).click();
    await page.getByRole('heading', { level: 1, name: link === 'API keys' ? 'API keys' : link }).waitFor();
  };

  it('creates a key whose plaintext is shown once, edits its limits, and the key calls a deployment through the openai SDK', async () => {
    await go('API keys');
    await page.getByRole('row').filter({ hasText: 'test key' }).waitFor();
    expect(await seriousAccessibilityViolations(page)).toEqual([]);

    await page.getByLabel('Name').fill('ci key');
    await page.getByLabel('Requests per minute (RPM) limit').fill('120');
    await page.getByRole('button', { name: 'Create key' }).click();
    const shown = page.getByRole('region', { name: 'Your new key ci key' });
    await shown.getByText('you will not see this key again').waitFor();
    const plaintext = (await shown.getByTestId('new-key-plaintext').textContent()) ?? '';
    expect(plaintext).toMatch(/^mk-/);
    await shown.getByRole('button', { name: 'Copy key' }).click();
    await shown.getByRole('button', { name: 'Copied' }).waitFor();
    expect(await page.evaluate(() => navigator.clipboard.readText())).toBe(plaintext);
    const row = page.getByRole('row').filter({ hasText: 'ci key' });
    await row.getByRole('cell', { name: '120', exact: true }).waitFor();
    expect(await seriousAccessibilityViolations(page)).toEqual([]);
    await screenshot(page, 'api-keys');

    // Limits: the API's own words beside the field, then a valid change.
    await row.getByRole('button', { name: 'Edit limits of ci key' }).click();
    const limits = page.getByRole('form', { name: 'Limits of ci key' });
    await limits.getByLabel('Requests per minute (RPM) limit').fill('0');
    await limits.getByRole('button', { name: 'Save limits' }).click();
    await limits.locator('#limits-rpm-error').filter({ hasText: 'rpmLimit must be a positive integer, got 0' }).waitFor();
    expect(await limits.getByLabel('Requests per minute (RPM) limit').getAttribute('aria-invalid')).toBe('true');
    await limits.getByLabel('Requests per minute (RPM) limit').fill('90');
    await limits.getByLabel('Tokens per day (TPD) limit').fill('50000');
    await limits.getByRole('button', { name: 'Save limits' }).click();
    await limits.waitFor({ state: 'detached' });
    await row.getByRole('cell', { name: '90', exact: true }).waitFor();
    await row.getByRole('cell', { name: (50_000).toLocaleString('en-US'), exact: true }).waitFor();

    // Leaving the page drops the plaintext: it is never shown, stored or fetchable again.
    await go('Webhooks');
    await go('API keys');
    await page.getByRole('row').filter({ hasText: 'ci key' }).waitFor();
    expect(await page.content()).not.toContain(plaintext);
    expect(await page.evaluate(() => JSON.stringify({ ...sessionStorage }) + JSON.stringify({ ...localStorage }))).not.toContain(plaintext);

    const { response, data } = await chat(plaintext);
    expect(response.status).toBe(200);
    expect(data.choices[0].message.content).toEqual(expect.any(String));
  });

  it('regenerates (the new plaintext shown once, the old one refused) and revokes with confirmation', async () => {
    await go('API keys');
    const row = page.getByRole('row').filter({ hasText: 'ci key' });
    await row.getByRole('button', { name: 'Regenerate ci key' }).click();
    await row.getByRole('button', { name: 'Yes, regenerate ci key' }).click();
    const shown = page.getByRole('region', { name: 'New plaintext of ci key' });
    const plaintext = (await shown.getByTestId('new-key-plaintext').textContent()) ?? '';
    expect(plaintext).toMatch(/^mk-/);
    await shown.getByRole('button', { name: 'I have stored it' }).click();
    await shown.waitFor({ state: 'detached' });
    expect((await chat(plaintext)).response.status).toBe(200);

    await row.getByRole('button', { name: 'Revoke ci key' }).click();
    await row.getByRole('button', { name: 'Yes, revoke ci key' }).click();
    await row.waitFor({ state: 'detached' });
    await expect(chat(plaintext)).rejects.toMatchObject({ status: 401 });
  });

  it('lists an image deployment\'s jobs live, previews a finished one from fresh links, and cancels a queued one', async () => {
    await go('Requests');
    // The text deployment has no jobs: the image deployment is preselected.
    expect(await page.getByLabel('Deployment').inputValue()).toBe(imageDeployment.id);
    await page.getByText('No requests on this deployment yet.').waitFor();
    expect(await seriousAccessibilityViolations(page)).toEqual([]);

    const submitted = await media.post('/images/generations?async=true', { model: IMAGE_MODEL, prompt: 'a lighthouse at dusk', size: '512x512' });
    expect(submitted.status).toBe(202);
    const finished = page.getByRole('row').filter({ hasText: submitted.body.id });
    await finished.getByText('succeeded', { exact: true }).waitFor();

    // A slow job holds the replica, so the next one waits in the queue.
    const slow = await media.post('/images/generations?async=true', { model: IMAGE_MODEL, prompt: 'hold [cpu-engine:delay=6000]', size: '512x512' });
    await media.waitForRecord(slow.body.id, (record) => record.status === 'running');
    const queued = await media.post('/images/generations?async=true', { model: IMAGE_MODEL, prompt: 'waits its turn', size: '512x512' });
    expect((await media.get(`/requests/${queued.body.id}`)).body.status).toBe('queued');
    await page.getByRole('row').filter({ hasText: slow.body.id }).getByText('running', { exact: true }).waitFor();
    const queuedRow = page.getByRole('row').filter({ hasText: queued.body.id });
    await queuedRow.getByText('queued', { exact: true }).waitFor();

    await queuedRow.getByRole('link', { name: queued.body.id }).click();
    await page.getByRole('heading', { level: 1, name: `Request ${queued.body.id}` }).waitFor();
    await page.getByRole('button', { name: 'Cancel request' }).click();
    await page.getByTestId('request-status').filter({ hasText: 'canceled' }).waitFor();
    await page.getByText('This request produced no output.').waitFor();
    expect((await media.get(`/requests/${queued.body.id}`)).body.status).toBe('canceled');

    await page.getByRole('link', { name: '← Requests' }).click();
    await page.getByRole('row').filter({ hasText: queued.body.id }).getByText('canceled', { exact: true }).waitFor();
    // The slow job's progress and completion arrive live.
    await page.getByRole('row').filter({ hasText: slow.body.id }).getByText('succeeded', { exact: true }).waitFor({ timeout: 20_000 });
    await page.getByLabel('Status').selectOption('canceled');
    await page.getByRole('row').filter({ hasText: queued.body.id }).waitFor();
    expect(await page.getByRole('row').filter({ hasText: submitted.body.id }).count()).toBe(0);
    await page.getByLabel('Status').selectOption('');
    await page.getByRole('row').filter({ hasText: submitted.body.id }).waitFor();
    expect(await seriousAccessibilityViolations(page)).toEqual([]);
    await screenshot(page, 'requests');

    await page.getByRole('link', { name: submitted.body.id }).click();
    await page.getByRole('heading', { level: 1, name: `Request ${submitted.body.id}` }).waitFor();
    const preview = page.getByRole('img', { name: 'Output 1 of 1' });
    await preview.waitFor();
    await waitFor(async () => (await preview.evaluate((image: HTMLImageElement) => image.complete && image.naturalWidth)) === 512, 10_000, 'the preview to load');
    expect(await page.getByRole('progressbar', { name: 'Progress' }).getAttribute('value')).toBe('100');
    // Fresh links on demand: signed anew each time.
    const firstLink = await preview.getAttribute('src');
    await page.waitForTimeout(1_100);
    await page.getByRole('button', { name: 'Get fresh links' }).click();
    await waitFor(async () => (await preview.getAttribute('src')) !== firstLink, 5_000, 'a freshly signed link');
    expect(await seriousAccessibilityViolations(page)).toEqual([]);
    await screenshot(page, 'request-detail');
  });

  it('registers an endpoint, sends a test and sees it in the live delivery log; reveals and rotates the secret; re-enables after auto-disable', async () => {
    await go('Webhooks');
    await page.getByText('No endpoints yet.').waitFor();
    await page.getByText('No deliveries yet.').waitFor();
    expect(await seriousAccessibilityViolations(page)).toEqual([]);

    // The API's own words beside the URL field.
    await page.getByLabel('URL', { exact: true }).fill('http://example.com/hook');
    await page.getByRole('button', { name: 'Add endpoint' }).click();
    await page.locator('#endpoint-url-error').filter({ hasText: "url must be a public HTTPS URL: scheme 'http' is not allowed" }).waitFor();

    const url = `${receiver.base}/ok/console`;
    await page.getByLabel('URL', { exact: true }).fill(url);
    await page.getByLabel('Description').fill('CI receiver');
    await page.getByRole('button', { name: 'Add endpoint' }).click();
    const endpointRow = page.getByRole('row').filter({ hasText: url }).filter({ hasText: 'CI receiver' });
    await endpointRow.getByText('Enabled').waitFor();

    await endpointRow.getByRole('button', { name: `Send test to ${url}` }).click();
    await waitFor(() => receiver.at('/ok/console').length === 1, 10_000, 'the test delivery');
    const deliveries = page.getByRole('table', { name: 'Deliveries' });
    const logged = deliveries.getByRole('row').filter({ hasText: 'webhook.test' });
    await logged.getByText('succeeded', { exact: true }).waitFor();
    await logged.getByText('HTTP 200', { exact: true }).waitFor();
    await logged.getByText(/^\d+ ms$/).waitFor();
    await logged.getByText('Attempts and body').click();
    const body = JSON.parse(receiver.at('/ok/console')[0].rawBody.toString('utf8')) as { id: string; type: string };
    expect(body.type).toBe('webhook.test');
    await logged.locator('pre').filter({ hasText: body.id }).waitFor();
    await logged.getByText(/Attempt 1: succeeded, HTTP 200, \d+ ms/).waitFor();

    // The secret stays hidden until asked; it verifies what the receiver got.
    expect(await page.getByTestId('signing-secret').count()).toBe(0);
    await page.getByRole('button', { name: 'Reveal signing secret' }).click();
    const secret = (await page.getByTestId('signing-secret').textContent()) ?? '';
    const delivered = receiver.at('/ok/console')[0];
    expect(verifyWebhookSignature(secret, delivered.headers['x-service-signature'] as string, delivered.rawBody)).toBe(true);
    expect(await seriousAccessibilityViolations(page)).toEqual([]);
    await screenshot(page, 'webhooks');

    await page.getByLabel('Grace period (seconds)').fill('60');
    await page.getByRole('button', { name: 'Rotate secret' }).click();
    await page.getByRole('button', { name: 'Yes, rotate secret' }).click();
    await page.getByRole('status').filter({ hasText: 'Rotated.' }).waitFor();
    await waitFor(async () => ((await page.getByTestId('signing-secret').textContent()) ?? secret) !== secret, 5_000, 'the new secret');
    await page.getByText('the previous secret also signs until').waitFor();
    await page.getByRole('button', { name: 'Hide signing secret' }).click();
    expect(await page.getByTestId('signing-secret').count()).toBe(0);

    await endpointRow.getByRole('button', { name: `Disable ${url}` }).click();
    await endpointRow.getByText('disabled by a user').waitFor();
    await endpointRow.getByRole('button', { name: `Enable ${url}` }).click();
    await endpointRow.getByText('Enabled').waitFor();

    // An endpoint that keeps failing is disabled by the server; the console offers to re-enable it.
    const failing = `${receiver.base}/fail`;
    await page.getByLabel('URL', { exact: true }).fill(failing);
    await page.getByRole('button', { name: 'Add endpoint' }).click();
    const failingRow = page.getByRole('row').filter({ hasText: failing }).filter({ has: page.getByRole('button') });
    await failingRow.getByText('Enabled').waitFor();
    for (const prompt of ['first', 'second']) {
      const job = await media.post('/images/generations?async=true', { model: IMAGE_MODEL, prompt, size: '512x512' });
      await media.waitForRecord(job.body.id);
    }
    // Both deliveries have spent their attempts (a retry still under way would count after re-enabling).
    const failedDeliveries = deliveries.getByRole('row').filter({ hasText: failing }).filter({ has: page.getByText('HTTP 500', { exact: true }) });
    await waitFor(async () => (await failedDeliveries.getByText('failed', { exact: true }).count()) === 2, 20_000, 'both deliveries to fail');
    await failingRow.getByRole('button', { name: `Re-enable ${failing}` }).waitFor({ timeout: 20_000 });
    await failingRow.getByText('2 failed in a row').waitFor();
    await failingRow.getByRole('button', { name: `Re-enable ${failing}` }).click();
    await failingRow.getByText('Enabled').waitFor();
    // Re-enabling starts the count afresh.
    await waitFor(async () => (await failingRow.getByText('failed in a row').count()) === 0, 5_000, 'the failure count to clear');
  });
});
