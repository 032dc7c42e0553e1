import type { Browser, Page } from 'playwright-core';
import { startTestServer, type TestServer, type TestWorkspace } from '../support/test-server';
import { launchBrowser, newPage, screenshot, seriousAccessibilityViolations } from './support/browser';

const MODEL = 'meta-llama/Llama-3.1-8B-Instruct';
const MODEL_NAME = 'Llama 3.1 8B Instruct';

describe('console: catalog → deployment', () => {
  let test: TestServer;
  let browser: Browser;

  beforeAll(async () => {
    // The built-in CPU engine acts out a short download, so the page shows Creating with progress first.
    test = await startTestServer({ controlPlane: { localModelDownloadMs: 2_000 } });
    browser = await launchBrowser();
  });

  afterAll(async () => {
    await browser?.close();
    await test?.stop();
  });

  async function openCreateForm(page: Page): Promise<void> {
    await page.getByRole('button', { name: `Deploy ${await modelName(page)}` }).click();
    await page.getByRole('heading', { name: /Create a deployment of/, level: 2 }).waitFor();
  }

  async function modelName(page: Page): Promise<string> {
    const row = page.getByRole('row').filter({ hasText: MODEL });
    await row.waitFor();
    return (await row.locator('strong').first().textContent()) ?? MODEL_NAME;
  }

  /**
   * Signs in on the catalog page itself (the sign-in form shows at any address and stays there),
   * so these tests do not pass through the deployments list.
   */
  async function signedIn(): Promise<{ page: Page; workspace: TestWorkspace }> {
    const workspace = await test.createWorkspace();
    const page = await newPage(browser, test.url);
    await page.goto('/console/catalog');
    await page.getByLabel('Workspace API key').fill(workspace.apiKey);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { name: 'Catalog', level: 1 }).waitFor();
    return { page, workspace };
  }

  it('creates a text deployment from the catalog and watches it turn Running live, then pauses, resumes and deletes it with confirmation', async () => {
    const { page, workspace } = await signedIn();
    await page.getByRole('row').filter({ hasText: MODEL }).waitFor();
    // Prices: the local offer's GPU price and the shared per-token prices of an eligible model.
    await page.getByRole('row').filter({ hasText: MODEL }).getByText(/from \$/).waitFor();
    expect(await seriousAccessibilityViolations(page)).toEqual([]);
    await screenshot(page, 'catalog');
    // Only the providers this server has configured are offered (no Kubernetes cluster here).
    const providers = await page.getByLabel('Capacity provider').locator('option').allTextContents();
    expect(providers).toContain('Local (this host)');
    expect(providers).not.toContain('Kubernetes cluster');

    await openCreateForm(page);
    await page.getByText(/This cap admits 1 of 1 offers that fit/).waitFor();
    // Share idle capacity is offered for this official chat model; output storage is not (text).
    expect(await page.getByLabel('Share idle capacity').count()).toBe(1);
    expect(await page.getByLabel('Output storage').count()).toBe(0);
    await page.getByLabel('Price cap per replica-hour (USD)').fill('1.5');
    expect(await seriousAccessibilityViolations(page)).toEqual([]);
    await screenshot(page, 'create-deployment');

    await page.getByRole('button', { name: 'Create deployment' }).click();
    await page.waitForURL(/\/console\/deployments\/dep_/);
    const deploymentId = page.url().split('/').pop()!;
    await page.getByRole('heading', { level: 1 }).waitFor();
    // A marker that a reload would erase: Running must arrive over the subscription.
    await page.evaluate(() => { (window as unknown as { stillThisPage: boolean }).stillThisPage = true; });
    await page.getByRole('status', { name: 'Status: Creating' }).waitFor();
    await page.getByLabel('Loading the model').waitFor();
    await page.getByRole('status', { name: 'Status: Running' }).waitFor({ timeout: 30_000 });
    expect(await page.evaluate(() => (window as unknown as { stillThisPage?: boolean }).stillThisPage)).toBe(true);
    await page.getByRole('table', { name: 'Replicas' }).getByRole('cell', { name: 'Running', exact: true }).waitFor();
    // The replica's cold start, phase by phase: placement to Hello, the acted-out download and load.
    const phases = page.getByRole('table', { name: 'Replicas' }).getByRole('list', { name: 'Start-up phases' });
    await phases.getByRole('listitem').filter({ hasText: /^load / }).waitFor();
    expect(await phases.getByRole('listitem').allTextContents()).toEqual([
      expect.stringMatching(/^provision \d+(\.\d)? (ms|s)$/),
      expect.stringMatching(/^download \d+(\.\d)? s \(acted out by the CPU engine\)$/),
      expect.stringMatching(/^load \d+(\.\d)? (ms|s) \(acted out by the CPU engine\)$/),
    ]);
    await page.getByTestId('startup-phases').getByText(/^\d+(\.\d)? s$/).waitFor();
    // The built-in engine is a stand-in, and the page says so where the user looks.
    await page.getByRole('note').filter({ hasText: 'built-in CPU stand-in' }).waitFor();
    await page.getByText(/in flight, .* queued over 1 replica/).waitFor({ timeout: 15_000 });
    expect(await page.getByTestId('base-url').textContent()).toMatch(/\/d\/llama-3-1-8b-instruct-[0-9a-f]{6}\/v1$/);
    // A call through the base URL shows up in the latency chart's summary (the next heartbeat reports it).
    const baseUrl = (await page.getByTestId('base-url').textContent())!;
    const chat = await fetch(`${baseUrl}/chat/completions`, {
      method: 'POST', headers: { authorization: `Bearer ${workspace.apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ messages: [{ role: 'user', content: 'hello' }], max_tokens: 4 }),
    });
    expect(chat.status).toBe(200);
    await page.getByTestId('latency-summary').filter({ hasText: /Last measured: [\d.]+ ms to first output, [\d.]+ ms to completion/ }).waitFor({ timeout: 15_000 });
    await page.getByRole('button', { name: 'Copy curl command' }).click();
    expect(await page.evaluate(() => navigator.clipboard.readText())).toContain('/chat/completions');
    expect(await seriousAccessibilityViolations(page)).toEqual([]);
    await screenshot(page, 'deployment-detail');

    // Pause asks first; Cancel leaves it running.
    await page.getByRole('button', { name: 'Pause', exact: true }).click();
    await page.getByRole('button', { name: 'Cancel' }).click();
    expect(await statusOf(workspace, deploymentId)).toBe('Running');
    await page.getByRole('button', { name: 'Pause', exact: true }).click();
    await page.getByRole('button', { name: 'Yes, pause' }).click();
    await page.getByRole('status', { name: 'Status: Paused' }).waitFor();

    await page.getByRole('button', { name: 'Resume', exact: true }).click();
    await page.getByRole('button', { name: 'Yes, resume' }).click();
    await page.getByRole('status', { name: 'Status: Running' }).waitFor({ timeout: 30_000 });

    await page.getByRole('button', { name: 'Delete', exact: true }).click();
    await page.getByRole('button', { name: 'Yes, delete' }).click();
    await page.waitForURL(/\/console\/deployments$/);
    expect(await statusOf(workspace, deploymentId)).toBe('NOT_FOUND');
  });

  it('a bad create shows the API\'s own message beside the field it names', async () => {
    const { page } = await signedIn();
    // An image model offers output storage (Managed by default) and no sharing.
    await page.getByRole('button', { name: 'Deploy FLUX.1 [schnell]' }).click();
    await page.getByRole('heading', { name: 'Create a deployment of FLUX.1 [schnell]', level: 2 }).waitFor();
    expect(await page.getByLabel('Output storage').inputValue()).toBe('managed');
    expect(await page.getByLabel('Share idle capacity').count()).toBe(0);

    await openCreateForm(page);
    await page.getByLabel('Minimum replicas').fill('3');
    await page.getByLabel('Maximum replicas').fill('2');
    await page.getByRole('button', { name: 'Create deployment' }).click();
    const maxReplicas = page.getByLabel('Maximum replicas');
    await page.getByText('maxReplicas must be an integer from minReplicas (3) to 64, got 2').waitFor();
    expect(await maxReplicas.getAttribute('aria-invalid')).toBe('true');
    // Beside the field: the message is the field's description.
    const describedBy = (await maxReplicas.getAttribute('aria-describedby'))!;
    expect(await page.locator(`[id="${describedBy}"]`).textContent()).toBe('maxReplicas must be an integer from minReplicas (3) to 64, got 2');

    await page.getByLabel('Maximum replicas').fill('3');
    await page.getByLabel('Price cap per replica-hour (USD)').fill('0');
    await page.getByRole('button', { name: 'Create deployment' }).click();
    await page.locator('#priceCapPerHour-error').filter({ hasText: 'priceCapPerHour must be a price per replica-hour above 0 and at most 1000, got 0' }).waitFor();
    expect(await page.getByLabel('Price cap per replica-hour (USD)').getAttribute('aria-invalid')).toBe('true');
    expect(await page.locator('#maxReplicas-error').count()).toBe(0);
    expect(page.url()).toMatch(/\/console\/catalog$/);
    expect(await seriousAccessibilityViolations(page)).toEqual([]);
  });

  it('sharing idle capacity shows "Sharing: Activating..." during the rolling restart, then the Shared badge; stopping removes it', async () => {
    const { page, workspace } = await signedIn();
    const deployment = await test.createDeployment(workspace, { modelId: MODEL });
    await page.goto(`/console/deployments/${deployment.id}`);
    await page.getByRole('status', { name: 'Status: Running' }).waitFor({ timeout: 30_000 });
    expect(await page.getByText('Shared', { exact: true }).count()).toBe(0);

    await page.getByRole('button', { name: 'Share idle capacity' }).click();
    await page.getByRole('button', { name: 'Yes, share idle capacity' }).click();
    await page.getByText('Sharing: Activating...').waitFor();
    await page.getByText('Shared', { exact: true }).waitFor({ timeout: 30_000 });
    expect(await page.getByText('Sharing: Activating...').count()).toBe(0);
    expect(await seriousAccessibilityViolations(page)).toEqual([]);

    await page.getByRole('button', { name: 'Stop sharing' }).click();
    await page.getByRole('button', { name: 'Yes, stop sharing' }).click();
    await page.getByRole('button', { name: 'Share idle capacity' }).waitFor();
    expect(await page.getByText('Shared', { exact: true }).count()).toBe(0);
  });

  /** The deployment's status as the API tells it, or the error code when it has none to tell. */
  async function statusOf(workspace: TestWorkspace, deploymentId: string): Promise<string> {
    const response = await fetch(`${test.url}/graphql`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${workspace.apiKey}` },
      body: JSON.stringify({ query: 'query ($id: ID!) { deployment(id: $id) { status } }', variables: { id: deploymentId } }),
    });
    const body = (await response.json()) as { data?: { deployment: { status: string } }; errors?: Array<{ extensions?: { code?: string } }> };
    return body.data?.deployment.status ?? String(body.errors?.[0]?.extensions?.code);
  }
});
