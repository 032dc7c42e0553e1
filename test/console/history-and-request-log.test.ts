import OpenAI from 'openai';
import type { Browser, Page } from 'playwright-core';
import { startTestServer, waitFor, type TestServer, type TestWorkspace } from '../support/test-server';
import { launchBrowser, newPage, screenshot, seriousAccessibilityViolations } from './support/browser';

/**
 * The deployment page's history charts and the Request log pages against a real server, its
 * agent and real calls made with the official SDK: the charts read the minute rollups over a
 * range the page chooses; the log lists, filters, searches and pages the calls, and an entry
 * shows every field, its trace timeline and its bodies once the workspace stores them.
 */
describe('console: deployment history and the request log', () => {
  let test: TestServer;
  let browser: Browser;
  let workspace: TestWorkspace;
  let deployment: { id: string; slug: string; baseUrl: string };
  let client: OpenAI;

  beforeAll(async () => {
    test = await startTestServer({
      controlPlane: {
        // Rollups written every 100 ms, the log every 20 ms; GPU time metered every 100 ms at $3.6/h.
        metricsHistory: { flushIntervalMs: 100 }, requestLog: { flushIntervalMs: 20 }, localPricePerHour: 3.6, meteringIntervalMs: 100,
        localAgentEnv: { WORKER_CPU_TEST_CONTROLS: 'true' },
      },
      gateway: process.env.CONSOLE_TEST_DIR ? { consoleDir: process.env.CONSOLE_TEST_DIR } : {},
    });
    browser = await launchBrowser();
    workspace = await test.createWorkspace();
    deployment = await test.createDeployment(workspace, { priceCapPerHour: 10 });
    await test.waitForReplicas(deployment.id, 1);
    client = new OpenAI({ baseURL: deployment.baseUrl, apiKey: workspace.apiKey, maxRetries: 0 });
    for (let index = 0; index < 4; index++) {
      const stream = await client.chat.completions.create({ messages: [{ role: 'user', content: `hello ${index}` }], max_tokens: 4, stream: true });
      for await (const _chunk of stream) { /* to the end */ }
      await client.chat.completions.create({ messages: [{ role: 'user', content: `again ${index}` }], max_tokens: 2 });
    }
    await client.chat.completions.create({ messages: [{ role: 'user', content: 'fail' }], max_tokens: 4, cpu_engine: { fail_after_tokens: 1 } } as any).catch(() => {});
  }, 90_000);

  afterAll(async () => {
    await browser?.close();
    await test?.stop();
  });

  async function signInAt(page: Page, path: string): Promise<void> {
    await page.goto(path);
    await page.getByLabel('Workspace API key').fill(workspace.apiKey);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('navigation', { name: 'Main' }).waitFor();
  }

  const query = (sql: string, parameters: unknown[] = []) => test.server.controlPlane.dataSource.query(sql, parameters);

  it('the deployment page charts requests, errors, tokens, TTFT and latency percentiles, replicas and GPU cost over 1 h, 24 h and 7 d', async () => {
    await waitFor(async () => (await query('SELECT coalesce(sum(requests), 0)::int AS n FROM deployment_metrics_minutes WHERE deployment_id = $1', [deployment.id]))[0].n >= 9
      && (await query('SELECT coalesce(sum(gpu_cost_usd), 0) AS c FROM deployment_metrics_minutes WHERE deployment_id = $1', [deployment.id]))[0].c > 0, 15_000, 'rollups written');
    const page = await newPage(browser, test.url);
    await signInAt(page, `/console/deployments/${deployment.id}`);
    const charts = page.getByTestId('history-charts');
    await charts.getByTestId('history-requests').waitFor();
    await expect(charts.getByTestId('history-requests').locator('figcaption').textContent()).resolves.toMatch(/^9 requests, 1 errors in the last 1 hour/);
    await expect(charts.getByTestId('history-tokens').locator('figcaption').textContent()).resolves.toMatch(/^\d+ in, \d+ out$/);
    await expect(charts.getByTestId('history-ttft').locator('figcaption').textContent()).resolves.toMatch(/worst p95 [\d.]+ (ms|s)$/);
    await expect(charts.getByTestId('history-latency').locator('figcaption').textContent()).resolves.toMatch(/worst p95 [\d.]+ (ms|s)$/);
    await expect(charts.getByTestId('history-replicas').locator('figcaption').textContent()).resolves.toBe('At most 1 running');
    // Money shows to the cent: a sub-cent bill (this test bills seconds of GPU time) reads "<$0.01".
    await expect(charts.getByTestId('history-cost').locator('figcaption').textContent()).resolves.toMatch(/^(<)?\$\d+\.\d+ billed/);
    // Lines and bars were drawn (recharts' SVG), not only captions.
    expect(await charts.getByTestId('history-latency').locator('path.recharts-curve').count()).toBeGreaterThanOrEqual(3);
    expect(await charts.getByTestId('history-requests').locator('.recharts-bar-rectangle').count()).toBeGreaterThan(0);
    await page.getByTestId('history-charts').scrollIntoViewIfNeeded();
    await screenshot(page, 'deployment-history');
    for (const label of ['24 hours', '7 days']) {
      await charts.getByRole('button', { name: label }).click();
      await expect(charts.getByRole('button', { name: label }).getAttribute('aria-pressed')).resolves.toBe('true');
      await waitFor(async () => /in the last (24 hours|7 days)/.test(await charts.getByTestId('history-requests').locator('figcaption').textContent() ?? ''), 10_000, `the ${label} range`);
      await expect(charts.getByTestId('history-requests').locator('figcaption').textContent()).resolves.toMatch(/^9 requests, 1 errors/);
    }
    await screenshot(page, 'deployment-history-7d');
    expect(await seriousAccessibilityViolations(page)).toEqual([]);
    await page.context().close();
  });

  it('the request log lists the calls newest first, filters, searches, pages, and shows an entry with its timeline, trace id and bodies', async () => {
    await waitFor(async () => (await query('SELECT count(*)::int AS n FROM request_log WHERE workspace_id = $1', [workspace.workspaceId]))[0].n >= 9, 10_000, 'log written');
    const page = await newPage(browser, test.url);
    await signInAt(page, '/console/deployments');
    await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Request log' }).click();
    const table = page.getByRole('table', { name: 'Request log' });
    await table.waitFor();
    expect(await table.locator('tbody tr').count()).toBe(9);
    await expect(page.getByTestId('body-setting').textContent()).resolves.toMatch(/^Bodies are not stored \(the default\)/);
    await screenshot(page, 'request-log');

    await page.getByLabel('Status').selectOption('failed');
    await waitFor(async () => (await table.locator('tbody tr').count()) === 1, 10_000, 'only the failed call');
    await expect(table.locator('tbody tr').first().textContent()).resolves.toContain('failed');
    await page.getByLabel('Status').selectOption('');
    await waitFor(async () => (await table.locator('tbody tr').count()) === 9, 10_000, 'all calls again');

    // Turn storing on from the page, then make a call whose body the entry shows.
    await page.getByRole('button', { name: 'Store bodies' }).click();
    await page.getByRole('button', { name: 'Yes, store bodies' }).click();
    await waitFor(async () => /^Bodies are stored/.test(await page.getByTestId('body-setting').textContent() ?? ''), 10_000, 'storing on');
    const answered = await client.chat.completions.create({ messages: [{ role: 'user', content: 'remember the lighthouse' }], max_tokens: 3 }).withResponse();
    const requestId = answered.response.headers.get('x-request-id')!;
    // What the tracing side fills (trace id, phases) is shown when present.
    const traceId = '4bf92f3577b34da6a3ce929d0e0e4736';
    // Phases in µs after arrival (admitted, dispatched, started, first token, ended), as the log keeps them.
    await waitFor(async () => (await query(`UPDATE request_log SET trace_id = $2, phase_us = $3 WHERE request_id = $1 RETURNING seq`,
      [requestId, traceId, [400, 1200, 3500, null, 9800]]))[0].length === 1, 10_000, 'the new entry written');

    await page.getByLabel('Request or trace id').fill(traceId);
    await page.getByRole('button', { name: 'Search' }).click();
    await waitFor(async () => (await table.locator('tbody tr').count()) === 1 && (await table.textContent())!.includes(requestId), 10_000, 'found by trace id');
    await table.getByRole('link', { name: requestId }).click();
    await page.getByRole('table', { name: 'Request fields' }).waitFor();
    await expect(page.getByTestId('trace-id').textContent()).resolves.toBe(traceId);
    const timeline = page.getByTestId('trace-timeline');
    expect(await timeline.locator('rect').count()).toBe(4);
    await expect(timeline.getByRole('img').getAttribute('aria-label')).resolves.toMatch(/^Timeline: Admission 0\.4 ms, Placement and dispatch 0\.8 ms, Wait at the replica 2\.3 ms/);
    await expect(page.getByLabel('Request body').textContent()).resolves.toContain('remember the lighthouse');
    await expect(page.getByLabel('Answer body').textContent()).resolves.toContain(answered.data.choices[0].message.content!);
    await screenshot(page, 'request-log-entry');
    expect(await seriousAccessibilityViolations(page)).toEqual([]);
    await page.context().close();
  });

  it('pages back in time by cursor, 50 entries a page', async () => {
    // Older entries of the workspace (as if written on earlier days), so there is more than one page.
    await query(`INSERT INTO request_log (workspace_id, request_id, api_key_id, deployment_id, model, endpoint, stream, outcome, prompt_tokens, completion_tokens,
        cached_tokens, started_at, latency_ms)
      SELECT $1, 'req_old_' || n, $2, $3, 'm', 'chat.completions', false, 'succeeded', 1, 1, 0, now() - interval '2 days' - n * interval '1 minute', 5
      FROM generate_series(1, 60) AS n`, [workspace.workspaceId, workspace.apiKeyId, deployment.id]);
    const page = await newPage(browser, test.url);
    await signInAt(page, '/console/request-log');
    const table = page.getByRole('table', { name: 'Request log' });
    await table.waitFor();
    expect(await table.locator('tbody tr').count()).toBe(50);
    await page.getByRole('button', { name: 'Older' }).click();
    await waitFor(async () => (await table.textContent())!.includes('req_old_60'), 10_000, 'the second page');
    expect(await table.locator('tbody tr').count()).toBe(10 + 60 - 50);
    await expect(page.getByRole('button', { name: 'Older' }).isDisabled()).resolves.toBe(true);
    await page.getByRole('button', { name: 'Newer' }).click();
    await waitFor(async () => (await table.locator('tbody tr').count()) === 50, 10_000, 'the first page again');
    // The last day only: the old entries are filtered out.
    await page.getByLabel('Time').selectOption('24h');
    await waitFor(async () => (await table.locator('tbody tr').count()) === 10, 10_000, 'the last day\'s entries');
    await page.context().close();
  });
});
