import type { Page } from 'playwright-core';
import { waitFor, type TestWorkspace } from '../support/test-server';
import { consoleSuite, newPage, screenshot, seriousAccessibilityViolations, signIn } from './support/browser';

/**
 * The deployments list is live (a pause made in another tab or through the API shows without a
 * reload) and counts only replicas that are not terminated; a deployment's page streams its
 * replicas' agent lines, per replica.
 */
describe('console: live deployments list and replica logs', () => {
  const suite = consoleSuite();
  let workspace: TestWorkspace;
  let deployment: { id: string; slug: string };

  beforeAll(async () => {
    workspace = await suite.test.createWorkspace();
    deployment = await suite.test.createDeployment(workspace);
    await suite.test.waitForReplicas(deployment.id, 1);
  });

  /** A marker a reload would erase: what shows afterwards came over the subscription. */
  const markPage = (page: Page) => page.evaluate(() => { (window as unknown as { stillThisPage: boolean }).stillThisPage = true; });
  const samePage = (page: Page) => page.evaluate(() => (window as unknown as { stillThisPage?: boolean }).stillThisPage === true);

  async function graphql(query: string, variables: Record<string, unknown>): Promise<void> {
    const response = await fetch(`${suite.test.url}/graphql`, {
      method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${workspace.apiKey}` }, body: JSON.stringify({ query, variables }),
    });
    const body = await response.json() as { errors?: unknown[] };
    expect(body.errors).toBeUndefined();
  }

  it('a pause in another tab and a resume through the API show on the list without a reload; Replicas counts only live ones', async () => {
    const list = await newPage(suite.browser, suite.test.url);
    await signIn(list, workspace.apiKey);
    const row = list.getByRole('table', { name: 'Deployments' }).getByRole('row').filter({ hasText: deployment.slug });
    await row.getByRole('cell', { name: 'Running', exact: true }).waitFor();
    expect(await row.getByRole('cell').nth(3).textContent()).toBe('1');
    await markPage(list);

    // Another tab pauses it.
    const other = await newPage(suite.browser, suite.test.url);
    await signIn(other, workspace.apiKey);
    await other.goto(`/console/deployments/${deployment.id}`);
    await other.getByRole('button', { name: 'Pause', exact: true }).click();
    const pausedAt = Date.now();
    await other.getByRole('button', { name: 'Yes, pause' }).click();
    await row.getByRole('cell', { name: 'Paused', exact: true }).waitFor();
    const seenAfterMs = Date.now() - pausedAt;
    // Its replica ends: the list counts none, though the deployment still lists it as Terminated.
    await row.getByRole('cell', { name: '0', exact: true }).waitFor();
    expect(await samePage(list)).toBe(true);

    // The API resumes it: Creating, then Running with one live replica (the terminated one is not counted).
    await graphql('mutation ($id: ID!) { resumeDeployment(id: $id) { id } }', { id: deployment.id });
    await row.getByRole('cell', { name: 'Running', exact: true }).waitFor({ timeout: 30_000 });
    await row.getByRole('cell', { name: '1', exact: true }).waitFor();
    const replicas = await suite.test.server.controlPlane.replicas.list(deployment.id);
    expect(replicas.filter((replica) => replica.status === 'Terminated').length).toBeGreaterThanOrEqual(1);
    expect(await samePage(list)).toBe(true);

    // A deployment created elsewhere joins the list, live too.
    const created = await suite.test.createDeployment(workspace, { provider: 'external' });
    await list.getByRole('row').filter({ hasText: created.slug }).waitFor();
    expect(await samePage(list)).toBe(true);
    expect(await seriousAccessibilityViolations(list)).toEqual([]);
    await screenshot(list, 'deployments-live');
    await suite.test.server.controlPlane.deployments.delete(workspace.workspaceId, created.id);
    await list.getByRole('row').filter({ hasText: created.slug }).waitFor({ state: 'detached' });
    // How long the pause took to show here (console's own clock; reported, not asserted: the machine may be busy).
    process.stdout.write(`pause made in another tab seen on the list after ${seenAfterMs} ms\n`);
  });

  it('the deployment page streams its replica\'s agent lines; the Logs button of a replica shows its own', async () => {
    const page = await newPage(suite.browser, suite.test.url);
    await signIn(page, workspace.apiKey);
    await page.goto(`/console/deployments/${deployment.id}`);
    await page.getByRole('status', { name: 'Status: Running' }).waitFor({ timeout: 30_000 });
    const log = page.getByRole('log', { name: 'Log lines of all replicas' });
    await log.getByText(/worker agent starting engine=cpu/).first().waitFor();
    await markPage(page);

    const [live] = (await suite.test.server.controlPlane.replicas.list(deployment.id)).filter((replica) => replica.status !== 'Terminated');
    await page.getByRole('button', { name: `Show the logs of ${live.id}` }).click();
    const own = page.getByRole('log', { name: `Log lines of ${live.id}` });
    await own.waitFor();
    expect(await page.getByLabel('Replica', { exact: true }).inputValue()).toBe(live.id);
    const before = await own.getByRole('listitem').count();

    // The agent drains on SIGTERM and says so; its provider starts it again as the same replica.
    suite.test.server.controlPlane.localProvider!.processOf(live.id)!.kill('SIGTERM');
    await own.getByText(/draining/).waitFor({ timeout: 15_000 });
    await waitFor(async () => (await own.getByText(/worker agent starting/).count()) >= 2, 15_000, 'the restarted agent\'s first line');
    expect(await own.getByRole('listitem').count()).toBeGreaterThan(before);
    expect(await samePage(page)).toBe(true);
    // Scrubbed: the agent prints the control plane's address; the page never shows it.
    const text = await own.textContent();
    expect(text).not.toContain(suite.test.server.controlPlane.grpcAddress);
    expect(text).not.toMatch(/jt-[\w-]{10}/);

    await page.getByLabel('Source').selectOption('engine');
    await page.getByText('No lines yet from this replica').waitFor();
    await page.getByLabel('Source').selectOption('all');
    await own.scrollIntoViewIfNeeded();
    expect(await seriousAccessibilityViolations(page)).toEqual([]);
    await screenshot(page, 'replica-logs');
  });
});
