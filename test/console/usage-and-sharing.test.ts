import OpenAI from 'openai';
import type { Browser, Page } from 'playwright-core';
import { startTestServer, waitFor, type TestServer } from '../support/test-server';
import { launchBrowser, newPage, screenshot, seriousAccessibilityViolations } from './support/browser';

const MODEL = 'meta-llama/Llama-3.1-8B-Instruct';
const SHARED_ID = `shared/${MODEL}`;

/**
 * The Usage and billing page and the Shared models page against a real server: tokens of calls
 * made with the official SDK and metered GPU cost appear, credit is shown as postpaid then
 * prepaid, and sharing a deployment from the page goes Activating → Shared live, the model
 * turning Available and a guest's call showing up as the owner's earnings.
 */
describe('console: usage and shared models', () => {
  let test: TestServer;
  let browser: Browser;

  beforeAll(async () => {
    test = await startTestServer({
      controlPlane: {
        // Metering every 100 ms at $3.6/h ($0.001 a second) so GPU cost shows within a second;
        // a fast capacity loop for the sharing rollout and a fast availability loop.
        localPricePerHour: 3.6, meteringIntervalMs: 100, capacityIntervalMs: 100, localMaxConcurrency: 4,
        sharing: { availabilityIntervalMs: 100 },
      },
      // CONSOLE_TEST_DIR: a console built elsewhere (vite build --outDir) instead of dist/console.
      gateway: process.env.CONSOLE_TEST_DIR ? { consoleDir: process.env.CONSOLE_TEST_DIR } : {},
    });
    browser = await launchBrowser();
  });

  /** Deleted after each test: the local provider has room for one replica at a time. */
  const deployments: Array<[string, string]> = [];
  afterEach(async () => {
    for (const [workspaceId, id] of deployments.splice(0)) await test.server.controlPlane.deployments.delete(workspaceId, id);
  });

  afterAll(async () => {
    await browser?.close();
    await test?.stop();
  });

  /** Clicks `button` until `condition` holds on the page (data that arrives in the background). */
  async function refreshUntil(page: Page, button: string, condition: () => Promise<boolean>, what: string, timeoutMs = 15_000): Promise<void> {
    await waitFor(async () => {
      if (await condition()) return true;
      await page.getByRole('button', { name: button, exact: true }).click();
      await page.waitForTimeout(200);
      return false;
    }, timeoutMs, what);
  }

  /** Opens `path` and signs in there with the key (the sign-in form shows at any path), landing on that page. */
  async function signInAt(page: Page, path: string, apiKey: string): Promise<void> {
    await page.goto(path);
    await page.getByLabel('Workspace API key').fill(apiKey);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('navigation', { name: 'Main' }).waitFor();
  }

  const utcToday = () => new Date().toISOString().slice(0, 10);

  it('usage: tokens of SDK calls and metered GPU cost by day and by deployment, credit postpaid then prepaid, ledger rows', async () => {
    const workspace = await test.createWorkspace();
    const page = await newPage(browser, test.url);
    await signInAt(page, '/console/usage', workspace.apiKey);
    await page.getByRole('heading', { level: 1, name: 'Usage and billing' }).waitFor();
    expect(await page.getByRole('link', { name: 'Usage and billing' }).getAttribute('aria-current')).toBe('page');

    // Nothing yet: empty states, postpaid credit, and the range defaults to the last 30 days.
    await page.getByText(/No GPU time or text requests from/).waitFor();
    await page.getByText('No money moved from').waitFor();
    await page.getByTestId('credit-balance').filter({ hasText: 'Postpaid' }).waitFor();
    expect(await page.getByLabel('To (UTC, inclusive)').inputValue()).toBe(utcToday());
    const from = await page.getByLabel('From (UTC)').inputValue();
    expect(Date.parse(utcToday()) - Date.parse(from)).toBe(29 * 86_400_000);
    expect(await seriousAccessibilityViolations(page)).toEqual([]);

    const deployment = await test.createDeployment(workspace, { modelId: MODEL, priceCapPerHour: 4 });
    deployments.push([workspace.workspaceId, deployment.id]);
    await test.waitForReplicas(deployment.id, 1);
    const client = new OpenAI({ baseURL: deployment.baseUrl, apiKey: workspace.apiKey, maxRetries: 2 });
    let prompt = 0;
    let completion = 0;
    for (let i = 0; i < 3; i += 1) {
      const answer = await client.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: `Hello number ${i}` }], max_tokens: 8 });
      prompt += answer.usage!.prompt_tokens;
      completion += answer.usage!.completion_tokens;
    }
    const total = (prompt + completion).toLocaleString('en-US');

    // By day: today's row has the three requests and their tokens, and GPU cost above zero.
    const report = page.getByRole('region', { name: /^Cost and tokens/ });
    const todayRow = report.getByRole('row', { name: new RegExp(`^${utcToday()}`) });
    // Money shows to the cent; the exact amount (a ledger keeps ten digits) is the title when it has more.
    const costOf = async (row: ReturnType<Page['getByRole']>) => {
      const amount = row.getByRole('cell').last().locator('.money');
      return (await amount.getAttribute('title')) ?? (await amount.textContent()) ?? '';
    };
    await refreshUntil(page, 'Refresh', async () => {
      if (await todayRow.count() === 0) return false;
      const cells = await todayRow.getByRole('cell').allTextContents();
      return cells[0] === '3' && cells[3] === total && /^\$0\.\d*[1-9]/.test(await costOf(todayRow));
    }, 'today\'s usage and cost on the page');
    expect(await todayRow.getByRole('cell').allTextContents()).toEqual(
      ['3', prompt.toLocaleString('en-US'), completion.toLocaleString('en-US'), total, expect.stringMatching(/^0\.\d{4}$/), expect.stringMatching(/^(<\$0\.01|\$0\.\d\d)$/)]);
    expect(await page.getByRole('img', { name: /GPU cost in USD by day/ }).count()).toBe(1);
    expect(await page.getByRole('img', { name: /prompt and completion tokens by day/ }).count()).toBe(1);

    // By deployment: the deployment is named by its model and slug.
    await page.getByRole('radio', { name: 'Deployment' }).check();
    await page.getByRole('heading', { name: 'Cost and tokens by deployment' }).waitFor();
    const deploymentRow = report.getByRole('row', { name: new RegExp(`${MODEL} \\(${deployment.slug}\\)`) });
    await deploymentRow.waitFor();
    const deploymentCells = await deploymentRow.getByRole('cell').allTextContents();
    expect(deploymentCells.slice(0, 4)).toEqual(['3', prompt.toLocaleString('en-US'), completion.toLocaleString('en-US'), total]);
    expect(await costOf(deploymentRow)).toMatch(/^\$0\.\d*[1-9]/);
    expect(await page.getByRole('img', { name: /GPU cost in USD by deployment/ }).count()).toBe(1);

    // By API key: the key by its name and prefix, with its requests and tokens (GPU time is per deployment).
    await page.getByRole('radio', { name: 'API key' }).check();
    const byKey = page.getByRole('region', { name: 'Tokens by API key' });
    const keyRow = byKey.getByRole('row', { name: /^test key \(mk-[\w-]{4}…\)/ });
    await keyRow.waitFor();
    expect(await keyRow.getByRole('cell').allTextContents()).toEqual(['3', prompt.toLocaleString('en-US'), completion.toLocaleString('en-US'), total]);
    expect(await byKey.getByRole('columnheader', { name: 'GPU cost' }).count()).toBe(0);
    expect(await byKey.textContent()).not.toContain(workspace.apiKeyId);
    expect(await seriousAccessibilityViolations(page)).toEqual([]);
    await screenshot(page, 'usage-by-key');
    await page.getByRole('radio', { name: 'Deployment' }).check();

    // Metered GPU time is in the ledger, its deployment named (not its id), its amount to the cent with every digit in the title.
    await refreshUntil(page, 'Refresh', async () => await page.getByRole('cell', { name: 'GPU time', exact: true }).count() > 0, 'a gpu_time ledger row');
    const gpuRow = page.getByRole('row').filter({ has: page.getByRole('cell', { name: 'GPU time', exact: true }) }).first();
    const gpuCells = gpuRow.getByRole('cell');
    expect(await gpuCells.nth(3).textContent()).toContain(`${MODEL} (${deployment.slug})`);
    expect(await gpuCells.nth(3).textContent()).not.toMatch(/dep_|rep_/);
    expect(await gpuCells.nth(2).textContent()).toMatch(/^(−<\$0\.01|−\$\d+\.\d\d)$/);
    expect(await gpuCells.nth(2).locator('.money').getAttribute('title')).toMatch(/^−\$0\.\d{3,}$/);

    // A top-up makes the workspace prepaid: the balance and the top-up row show.
    await test.server.controlPlane.billing.addCredit(workspace.workspaceId, '25');
    await refreshUntil(page, 'Refresh', async () => /prepaid credit left/.test(await page.getByTestId('credit-balance').textContent() ?? ''), 'a prepaid balance');
    expect(await page.getByTestId('credit-balance').textContent()).toMatch(/^\$2[45](\.\d+)? prepaid credit left/);
    await page.getByRole('cell', { name: 'Top-up', exact: true }).waitFor();
    const topUp = page.getByRole('row').filter({ has: page.getByRole('cell', { name: 'Top-up', exact: true }) });
    expect(await topUp.getByRole('cell').nth(2).textContent()).toBe('$25.00');

    // A range that ends before it starts is refused on the page, without asking the API.
    await page.getByLabel('From (UTC)').fill('2030-01-02');
    await page.getByRole('alert').filter({ hasText: 'The start date must not be after the end date.' }).waitFor();
    await page.getByRole('button', { name: 'Last 30 days' }).click();
    await page.getByRole('heading', { name: 'Cost and tokens by deployment' }).waitFor();
    await deploymentRow.waitFor();
    await page.getByRole('radio', { name: 'Day' }).check();
    await todayRow.waitFor();

    expect(await seriousAccessibilityViolations(page)).toEqual([]);
    await screenshot(page, 'usage');
  });

  it('both pages say what failed in the API\'s words when a query fails, and stay accessible', async () => {
    const workspace = await test.createWorkspace();
    const page = await newPage(browser, test.url);
    // The report and the shared models fail as the API fails (HTTP 200 with errors); other operations pass.
    await page.route('**/graphql', async (route) => {
      const body = route.request().postData() ?? '';
      if (/"operationName":"(UsageReport|SharedModelsList)"/.test(body)) {
        await route.fulfill({ status: 200, contentType: 'application/json', body: JSON.stringify({ errors: [{ message: 'the database is away', extensions: { code: 'SERVICE_UNAVAILABLE' } }] }) });
      } else {
        await route.continue();
      }
    });
    await signInAt(page, '/console/usage', workspace.apiKey);
    await page.getByRole('alert').filter({ hasText: 'Usage could not be loaded' }).filter({ hasText: 'the database is away' }).waitFor();
    await page.getByTestId('credit-balance').filter({ hasText: 'Postpaid' }).waitFor();
    expect(await seriousAccessibilityViolations(page)).toEqual([]);

    await page.getByRole('link', { name: 'Shared models' }).click();
    await page.getByRole('alert').filter({ hasText: 'Shared models could not be loaded' }).filter({ hasText: 'SERVICE_UNAVAILABLE' }).waitFor();
    await page.getByText('No guest has used your shared deployments in the last 30 days.').waitFor();
    expect(await seriousAccessibilityViolations(page)).toEqual([]);
  });

  it('shared models: prices and live availability, sharing turned on from the page goes Activating → Shared, a guest call becomes earnings', async () => {
    const owner = await test.createWorkspace();
    const guest = await test.createWorkspace();
    const deployment = await test.createDeployment(owner, { modelId: MODEL, priceCapPerHour: 4 });
    deployments.push([owner.workspaceId, deployment.id]);
    await test.waitForReplicas(deployment.id, 1);

    const page = await newPage(browser, test.url);
    await signInAt(page, '/console/shared', owner.apiKey);
    await page.getByRole('heading', { level: 1, name: 'Shared models' }).waitFor();

    // The guest view: the shareable model with its prices, unavailable while nobody shares it.
    const modelRow = page.getByRole('row', { name: new RegExp(`^${SHARED_ID.replace(/[.]/g, '\\.')}`) });
    await modelRow.waitFor();
    expect(await modelRow.getByRole('cell').allTextContents()).toEqual(['$0.18', '$0.18', 'Unavailable', '0']);
    expect(await page.getByTestId('shared-base-url').textContent()).toBe(`${test.url}/shared/v1`);
    const snippet = await page.getByRole('region', { name: 'Endpoint' }).locator('pre').textContent();
    expect(snippet).toContain(`baseURL: '${test.url}/shared/v1'`);
    expect(snippet).toContain(`model: '${SHARED_ID}'`);
    await page.getByRole('button', { name: 'Copy SDK snippet' }).click();
    expect(await page.evaluate(() => navigator.clipboard.readText())).toBe(snippet);
    await page.getByText('No guest has used your shared deployments in the last 30 days.').waitFor();
    expect(await seriousAccessibilityViolations(page)).toEqual([]);

    // Record every sharing state the row shows, however briefly.
    const sharingRow = page.getByTestId(`sharing-${deployment.id}`);
    expect(await sharingRow.getByTestId('sharing-state').textContent()).toBe('Not shared');
    await page.evaluate((rowTestId) => {
      const seen: string[] = [];
      (window as unknown as { seenSharing: string[] }).seenSharing = seen;
      const record = () => {
        const text = document.querySelector(`[data-testid="${rowTestId}"] [data-testid="sharing-state"]`)?.textContent ?? '';
        if (text && seen[seen.length - 1] !== text) seen.push(text);
      };
      record();
      new MutationObserver(record).observe(document.body, { subtree: true, childList: true, characterData: true });
    }, `sharing-${deployment.id}`);

    await sharingRow.getByRole('button', { name: 'Share idle capacity' }).click();
    await sharingRow.getByRole('group', { name: /Its only replica restarts/ }).waitFor();
    await sharingRow.getByRole('button', { name: 'Yes, share idle capacity' }).click();
    await sharingRow.getByTestId('sharing-state').filter({ hasText: /^Shared$/ }).waitFor({ timeout: 30_000 });
    expect(await page.evaluate(() => (window as unknown as { seenSharing: string[] }).seenSharing)).toEqual(['Not shared', 'Sharing: Activating...', 'Shared']);
    await sharingRow.getByRole('button', { name: 'Stop sharing' }).waitFor();

    // The model turns Available through the subscription (the page is not reloaded).
    await modelRow.getByRole('cell', { name: 'Available', exact: true }).waitFor({ timeout: 15_000 });

    // A guest of another workspace calls it with the SDK at /shared/v1: the owner earns.
    const guestClient = new OpenAI({ baseURL: `${test.url}/shared/v1`, apiKey: guest.apiKey, maxRetries: 3 });
    const answer = await guestClient.chat.completions.create({ model: SHARED_ID, messages: [{ role: 'user', content: 'Hello owner' }], max_tokens: 8 });
    const earningsRow = page.getByRole('region', { name: /Your earnings/ })
      .getByRole('row', { name: new RegExp(`^${MODEL.replace(/[.]/g, '\\.')} \\(${deployment.slug}\\)`) });
    await refreshUntil(page, 'Refresh earnings', async () => await earningsRow.count() > 0, 'the guest call in the earnings');
    const cells = await earningsRow.getByRole('cell').allTextContents();
    expect(cells.slice(0, 3)).toEqual(['1', String(answer.usage!.prompt_tokens), String(answer.usage!.completion_tokens)]);
    expect(cells[3]).toMatch(/^(<\$0\.01|\$0\.\d\d)$/);
    expect(await earningsRow.getByRole('cell').nth(3).locator('.money').getAttribute('title')).toMatch(/^\$0\.\d*[1-9]$/);

    expect(await seriousAccessibilityViolations(page)).toEqual([]);
    await screenshot(page, 'shared-models');
  });
});
