import OpenAI from 'openai';
import type { Page } from 'playwright-core';
import { waitFor, type TestDeployment, type TestWorkspace } from '../support/test-server';
import { consoleSuite, newPage, screenshot, seriousAccessibilityViolations, signIn } from './support/browser';

/**
 * The deployment page's Autoscaling section against a real server: the policy and SLO stated and
 * edited (a bad SLO refused beside its field), SLO attainment, the forecast beside arrivals and
 * cost against fixed-max from seeded rollups and decisions, the recent decisions with their
 * policy, movedBy and forecast; and a deployment at zero that shows "Scaled to zero", then
 * "Starting: N requests waiting" while real requests wait for its cold start, then the new
 * replica's start-up phases.
 */
describe('console: autoscaling', () => {
  const suite = consoleSuite({
    controlPlane: {
      // Every engine takes 8 s to load, so a cold start lasts long enough to be seen waiting
      // (the page re-reads the count every second); the loop runs every 100 ms.
      capacityIntervalMs: 100, autoscaleWindowMs: 300, coldStartMaxWaitMs: 60_000, coldStartEstimateMs: 8_000,
      localAgentEnv: { WORKER_CPU_LOAD_MS: '8000' },
    },
  });
  let workspace: TestWorkspace;

  beforeAll(async () => {
    workspace = await suite.test.createWorkspace();
  });

  const query = (sql: string, parameters: unknown[] = []) => suite.test.server.controlPlane.dataSource.query(sql, parameters);

  async function openDeployment(id: string): Promise<Page> {
    const page = await newPage(suite.browser, suite.test.url);
    await signIn(page, workspace.apiKey);
    await page.goto(`/console/deployments/${id}`);
    await page.getByTestId('autoscaling').waitFor();
    return page;
  }

  it('states the policy and SLO, edits them (a bad SLO refused beside its field), and charts attainment, forecast and cost against fixed-max', async () => {
    const deployment = await suite.test.createDeployment(workspace, { minReplicas: 1, maxReplicas: 4 });
    // Paused at once: no replica runs, so the seeded minutes below are the whole history.
    await suite.test.server.controlPlane.deployments.pause(workspace.workspaceId, deployment.id);
    await waitFor(async () => (await suite.test.server.controlPlane.replicas.listActive(deployment.id)).length === 0, 20_000, 'no replica left');
    // It existed the whole hour, so fixed-max is priced for every minute of the range.
    await query(`UPDATE deployments SET created_at = now() - interval '2 hours' WHERE id = $1`, [deployment.id]);
    // 30 minutes: 10 requests judged a minute, all within the SLO but 2 in each of 3 minutes
    // (294 of 300: 98.0 %); 12 arrivals a minute (0.2/s); 2 replicas at $0.05 a replica-minute.
    await query(`INSERT INTO deployment_metrics_minutes (deployment_id, minute, requests, slo_requests, within_slo, arrivals, replicas, gpu_cost_usd)
      SELECT $1, date_trunc('minute', now()) - n * interval '1 minute', 10, 10, CASE WHEN n % 10 = 0 THEN 8 ELSE 10 END, 12, 2, 0.1
      FROM generate_series(6, 35) AS n`, [deployment.id]);
    await query(`INSERT INTO scaling_decisions (deployment_id, workspace_id, decided_at, action, reason, explanation, signal, target_concurrency,
        current_replicas, wanted_replicas, desired_replicas, inputs, policy, moved_by, forecast_arrivals_per_second, arrivals_per_second)
      SELECT $1, $2, date_trunc('minute', now()) - n * interval '1 minute' + interval '30 seconds', 'hold', 'within_tolerance',
        'Holding at 2 replicas: the forecast 0.25 req/s needs 2', 0.5, 4, 2, 2, 2, '{}', 'slo', 'forecast', 0.25, 0.2
      FROM generate_series(6, 35) AS n`, [deployment.id, workspace.workspaceId]);

    const page = await openDeployment(deployment.id);
    const section = page.getByTestId('autoscaling');
    await expect(section.getByTestId('scaling-policy').textContent()).resolves.toMatch(/^Concurrency/);
    await expect(section.getByTestId('slo').textContent()).resolves.toBe('No SLO');

    const attainment = section.getByTestId('autoscaling-attainment').locator('figcaption');
    await expect(attainment.textContent()).resolves.toMatch(/^98\.0 % of 300 requests within the SLO in the last 1 hour/);
    await expect(section.getByTestId('autoscaling-forecast').locator('figcaption').textContent())
      .resolves.toMatch(/^Peak 0\.20 req\/s arrived; the dashed line is what the autoscaler forecast/);
    // 30 minutes at 2 × $0.05 billed; fixed-max: 60 minutes × 4 replicas × $0.05.
    await expect(section.getByTestId('autoscaling-cost').locator('figcaption').textContent())
      .resolves.toBe('$3.00 billed against $12.00 had 4 replicas run throughout the last 1 hour (25.0 % of it)');
    expect(await section.getByTestId('autoscaling-forecast').locator('path.recharts-curve').count()).toBe(2);
    expect(await section.getByTestId('autoscaling-cost').locator('path.recharts-curve').count()).toBe(2);
    // The recent decisions: policy, what moved each, and the forecast beside the arrivals (the
    // seeded ones: the loop's own, newer, were made by concurrency before the pause).
    const decision = page.getByRole('table', { name: 'Scaling decisions' }).locator('tbody tr').filter({ hasText: 'forecast 0.25 req/s' }).first();
    await expect(decision.locator('td').nth(3).textContent()).resolves.toBe('slo');
    await expect(decision.locator('td').nth(4).textContent()).resolves.toBe('forecast');
    await expect(decision.locator('td').nth(6).textContent()).resolves.toBe('0.20 req/s, forecast 0.25 req/s');

    // A TTFT no replica meets is refused beside its field; the deployment keeps its settings.
    await section.getByRole('button', { name: 'Edit autoscaling' }).click();
    const form = page.getByRole('form', { name: 'Edit autoscaling' });
    await form.getByLabel('Scaling policy').selectOption('SLO');
    await form.getByLabel('Time to first token, p95 (ms)').fill('10');
    await form.getByRole('button', { name: 'Save autoscaling' }).click();
    const ttftError = form.locator('#slo-ttftP95Ms-error');
    await ttftError.waitFor();
    await expect(ttftError.textContent()).resolves.toMatch(/^slo\.ttftP95Ms must be an integer number of milliseconds from \d+ to 3600000/);
    await expect(form.getByLabel('Time to first token, p95 (ms)').getAttribute('aria-invalid')).resolves.toBe('true');
    expect(await form.getByRole('alert').count()).toBe(0);
    await screenshot(page, 'autoscaling-field-error');

    await form.getByLabel('Time to first token, p95 (ms)').fill('800');
    await form.getByLabel('Time per output token, p95 (ms)').fill('60');
    await form.getByLabel(/^Scale to zero after/).fill('300');
    await form.getByLabel(/^Cold-start queue limit/).fill('25');
    await form.getByRole('button', { name: 'Save autoscaling' }).click();
    await form.waitFor({ state: 'detached' });
    await waitFor(async () => (await section.getByTestId('slo').textContent()) === 'TTFT p95 ≤ 800 ms, time per output token p95 ≤ 60 ms', 10_000, 'the SLO stated');
    await expect(section.getByTestId('scaling-policy').textContent()).resolves.toMatch(/^SLO: as many replicas as the SLO needs/);
    await expect(section.textContent()).resolves.toContain('After 300 s without a request');
    await expect(section.textContent()).resolves.toContain('Up to 25 requests per server');
    const [row] = await query('SELECT scaling_policy, slo_ttft_p95_ms, slo_tpot_p95_ms, scale_to_zero_after_seconds, cold_start_queue_limit FROM deployments WHERE id = $1', [deployment.id]);
    expect(row).toEqual({ scaling_policy: 'slo', slo_ttft_p95_ms: 800, slo_tpot_p95_ms: 60, scale_to_zero_after_seconds: 300, cold_start_queue_limit: 25 });

    await section.getByTestId('autoscaling-attainment').scrollIntoViewIfNeeded();
    await screenshot(page, 'deployment-autoscaling');
    // The page's one range moves the Autoscaling charts and the History charts alike.
    await section.getByRole('group', { name: 'Autoscaling time range' }).getByRole('button', { name: '24 hours' }).click();
    await waitFor(async () => /in the last 24 hours/.test(await attainment.textContent() ?? ''), 10_000, 'the 24 hour range');
    await expect(attainment.textContent()).resolves.toMatch(/^98\.0 % of 300 requests/);
    await expect(page.getByTestId('history-charts').getByRole('button', { name: '24 hours' }).getAttribute('aria-pressed')).resolves.toBe('true');
    expect(await seriousAccessibilityViolations(page)).toEqual([]);
    await page.context().close();
  });

  it('a deployment at zero shows "Scaled to zero", then "Starting: N requests waiting" while requests wait, then its new replica\'s start-up phases', async () => {
    const zero: TestDeployment = await suite.test.createDeployment(workspace, { minReplicas: 1, maxReplicas: 1, autoscale: true });
    await suite.test.waitForReplicas(zero.id, 1, 40_000);
    // Under the API's one-minute floor, as test/capacity/scale-to-zero.test.ts does, so it idles to zero at once.
    await suite.test.server.controlPlane.deploymentStore.update(zero.id, { scaleToZeroAfterSeconds: 1 }, ['Creating', 'Running']);
    await waitFor(async () => (await suite.test.server.controlPlane.replicas.listActive(zero.id)).length === 0, 30_000, 'a scale to zero');

    const page = await openDeployment(zero.id);
    const status = page.getByTestId('cold-start-status');
    await waitFor(async () => /^Scaled to zero/.test(await status.textContent().catch(() => '') ?? ''), 10_000, '"Scaled to zero"');

    const client = new OpenAI({ baseURL: zero.baseUrl, apiKey: workspace.apiKey, maxRetries: 0, timeout: 60_000 });
    const answers = [1, 2].map((index) => client.chat.completions.create({ messages: [{ role: 'user', content: `cold ${index}` }], max_tokens: 2 }));
    await waitFor(async () => (await status.textContent().catch(() => '')) === 'Starting: 2 requests waiting for a replica', 8_000, '"Starting: 2 requests waiting"');
    await screenshot(page, 'deployment-cold-start');
    // Idle only after an hour from now on, so the replica that starts stays to be looked at.
    await suite.test.server.controlPlane.deploymentStore.update(zero.id, { scaleToZeroAfterSeconds: 3_600 }, ['Creating', 'Running']);
    for (const answer of await Promise.all(answers)) expect(answer.choices[0].message.content).toBeTruthy();
    await waitFor(async () => (await status.count()) === 0, 15_000, 'the status gone once a replica runs');

    // The replica that started for them shows its phases, each with its time.
    const phases = page.getByRole('table', { name: 'Replicas' }).getByRole('list', { name: 'Start-up phases' });
    await phases.getByRole('listitem').filter({ hasText: /^load / }).waitFor({ timeout: 15_000 });
    const texts = await phases.first().getByRole('listitem').allTextContents();
    expect(texts[0]).toMatch(/^provision \d+(\.\d)? (ms|s)$/);
    expect(texts).toContainEqual(expect.stringMatching(/^load \d+(\.\d)? s/));
    // The decision log shows the cold start and what moved it.
    await waitFor(async () => (await page.getByRole('table', { name: 'Scaling decisions' }).textContent() ?? '').includes('waiting'), 15_000, 'the cold start decision');
    await page.context().close();
  });
});
