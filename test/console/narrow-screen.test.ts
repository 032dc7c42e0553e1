import type { Page } from 'playwright-core';
import type { TestWorkspace } from '../support/test-server';
import { consoleSuite, screenshot, seriousAccessibilityViolations, signIn } from './support/browser';

/** An iPhone-sized window. */
const PHONE = { width: 390, height: 844 };

/**
 * The console on a phone-wide window: the navigation folds behind a Menu button, no page
 * scrolls sideways (wide tables scroll inside their own box), and nothing the console loads
 * fails, its favicon included.
 */
describe('console: narrow screens and the favicon', () => {
  const suite = consoleSuite();
  let workspace: TestWorkspace;
  let deployment: { id: string };
  let page: Page;
  /** Every response of 400 or more, and every request that failed, while the tests ran. */
  const failures: string[] = [];

  beforeAll(async () => {
    workspace = await suite.test.createWorkspace();
    deployment = await suite.test.createDeployment(workspace);
    await suite.test.waitForReplicas(deployment.id, 1);
    const context = await suite.browser.newContext({ baseURL: suite.test.url, viewport: PHONE, bypassCSP: true, isMobile: true, hasTouch: true });
    page = await context.newPage();
    page.setDefaultTimeout(15_000);
    page.on('response', (response) => {
      if (response.status() >= 400) failures.push(`${response.status()} ${response.url()}`);
    });
    page.on('requestfailed', (request) => failures.push(`failed ${request.url()}: ${request.failure()?.errorText}`));
    await signIn(page, workspace.apiKey);
  });

  /**
   * How far the page scrolls sideways (0: it does not), and when it does, the outermost elements
   * that stick out past the window (what to fix).
   */
  const pageOverflow = () => page.evaluate(() => {
    const width = document.documentElement.clientWidth;
    const overflow = document.documentElement.scrollWidth - width;
    if (overflow === 0) return 0;
    const out = [...document.querySelectorAll('body *')].filter((element) => element.getBoundingClientRect().right > width + 1
      && !(element.parentElement && element.parentElement.getBoundingClientRect().right > width + 1));
    return { overflow, out: out.slice(0, 5).map((element) => `${element.tagName.toLowerCase()}.${element.className} "${(element.textContent ?? '').slice(0, 40)}"`) };
  });

  /** Tables wider than the window that are not inside a box that scrolls sideways. */
  const unscrolledTables = () => page.evaluate(() => [...document.querySelectorAll('main table')].filter((table) => {
    for (let box = table.parentElement; box && box.tagName !== 'MAIN'; box = box.parentElement) {
      if (['auto', 'scroll'].includes(getComputedStyle(box).overflowX)) return false;
    }
    return table.getBoundingClientRect().width > document.documentElement.clientWidth;
  }).map((table) => table.getAttribute('aria-label') ?? table.querySelector('caption')?.textContent ?? 'a table'));

  it('folds the navigation behind Menu; a link followed folds it again', async () => {
    const nav = page.getByRole('navigation', { name: 'Main' });
    const menu = nav.getByRole('button', { name: 'Menu' });
    expect(await menu.getAttribute('aria-expanded')).toBe('false');
    expect(await nav.getByRole('link', { name: 'Catalog' }).isVisible()).toBe(false);
    await menu.click();
    expect(await menu.getAttribute('aria-expanded')).toBe('true');
    await nav.getByRole('link', { name: 'Catalog' }).click();
    await page.getByRole('heading', { level: 1, name: 'Catalog' }).waitFor();
    expect(await nav.getByRole('link', { name: 'Catalog' }).isVisible()).toBe(false);
    expect(await pageOverflow()).toBe(0);
    expect(await seriousAccessibilityViolations(page)).toEqual([]);
  });

  it('no page scrolls sideways: wide tables scroll inside their own box', async () => {
    const pages: Array<[string, string]> = [
      ['/console/deployments', 'Deployments'], [`/console/deployments/${deployment.id}`, 'Llama 3.1 8B Instruct'], ['/console/catalog', 'Catalog'], ['/console/adapters', 'Adapters'],
      ['/console/requests', 'Requests'], ['/console/batches', 'Batches'], ['/console/keys', 'API keys'], ['/console/webhooks', 'Webhooks'],
      ['/console/usage', 'Usage and billing'], ['/console/shared', 'Shared models'], ['/console/playground', 'Playground'],
    ];
    const outcomes = [];
    for (const [path, heading] of pages) {
      await page.goto(path);
      await page.getByRole('heading', { level: 1, name: heading }).waitFor();
      // Lists and charts arrive after the heading.
      await page.waitForLoadState('networkidle').catch(() => {});
      outcomes.push({ path, overflow: await pageOverflow(), unscrolled: await unscrolledTables() });
    }
    expect(outcomes).toEqual(pages.map(([path]) => ({ path, overflow: 0, unscrolled: [] })));

    // The catalog's table is wider than a phone: it scrolls in its box, the page does not.
    await page.goto('/console/catalog');
    await page.getByRole('row').nth(1).waitFor();
    const box = await page.evaluate(() => {
      const scroller = document.querySelector('main table')!.parentElement!;
      return { scrolls: scroller.scrollWidth > scroller.clientWidth, page: document.documentElement.scrollWidth - document.documentElement.clientWidth };
    });
    expect(box).toEqual({ scrolls: true, page: 0 });

    await page.goto(`/console/deployments/${deployment.id}`);
    await page.getByRole('status', { name: 'Status: Running' }).waitFor({ timeout: 30_000 });
    expect(await seriousAccessibilityViolations(page)).toEqual([]);
    await screenshot(page, 'narrow-deployment');
  });

  it('serves its favicon, and nothing the console loaded failed', async () => {
    const href = await page.locator('link[rel="icon"]').getAttribute('href');
    expect(href).toBe('/console/favicon.svg');
    const icon = await page.request.get(href!);
    expect(icon.status()).toBe(200);
    expect(icon.headers()['content-type']).toBe('image/svg+xml');
    expect(await icon.text()).toMatch(/^<svg /);
    expect(failures).toEqual([]);
  });
});
