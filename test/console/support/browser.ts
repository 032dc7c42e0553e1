import fs from 'node:fs';
import path from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import { startTestServer, type TestServer, type TestServerOptions } from '../../support/test-server';

/**
 * Debian's Chromium (`apt-get install -y chromium`; browser downloads are impossible here),
 * driven by playwright-core. CHROMIUM_PATH overrides the path. Without a browser the suite fails
 * saying so: a skipped browser test proves nothing.
 */
export const CHROMIUM_PATH = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

/** Where each page's screenshot is written (a CI artifact; docs/console.md shows a few, copied to docs/console/). */
export const SCREENSHOT_DIR = path.resolve(__dirname, '../../../test-artifacts/console');

export async function launchBrowser(): Promise<Browser> {
  if (!fs.existsSync(CHROMIUM_PATH)) {
    throw new Error(`no Chromium at ${CHROMIUM_PATH}: apt-get install -y chromium (or set CHROMIUM_PATH)`);
  }
  return await chromium.launch({
    executablePath: CHROMIUM_PATH,
    headless: true,
    // As root in a container Chromium needs --no-sandbox; the others keep it off this machine's
    // closed network (its background connections are refused, many at a time).
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
      '--disable-component-update', '--disable-sync', '--disable-dev-shm-usage'],
  });
}

/** A new tab in its own context (its own session storage), with clipboard access for copy buttons. */
export async function newPage(browser: Browser, baseUrl: string): Promise<Page> {
  // bypassCSP only so axe-core can be injected: the console's own CSP allows no inline script.
  const context = await browser.newContext({ baseURL: baseUrl, viewport: { width: 1280, height: 860 }, bypassCSP: true });
  await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: baseUrl });
  const page = await context.newPage();
  page.setDefaultTimeout(15_000);
  return page;
}

/** Signs in by pasting a workspace key on the sign-in page. */
export async function signIn(page: Page, apiKey: string): Promise<void> {
  await page.goto('/console/');
  await page.getByLabel('Workspace API key').fill(apiKey);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('navigation', { name: 'Main' }).waitFor();
}

const AXE_SOURCE = fs.readFileSync(require.resolve('axe-core/axe.min.js'), 'utf8');

export interface AxeViolation { id: string; impact: string | null; help: string; nodes: number }

/** axe-core on the page as it is now: the serious and critical violations (the bar: none). */
export async function seriousAccessibilityViolations(page: Page): Promise<AxeViolation[]> {
  await page.addScriptTag({ content: AXE_SOURCE });
  const violations = await page.evaluate(async () => {
    const axe = (window as unknown as { axe: { run: (context: Document) => Promise<{ violations: Array<{ id: string; impact: string | null; help: string; nodes: unknown[] }> }> } }).axe;
    const result = await axe.run(document);
    return result.violations.map((violation) => ({ id: violation.id, impact: violation.impact, help: violation.help, nodes: violation.nodes.length }));
  });
  return violations.filter((violation) => violation.impact === 'serious' || violation.impact === 'critical');
}

/** A full-page screenshot saved as `<name>.png` in SCREENSHOT_DIR, and the visible part as a small `<name>.jpg` (what docs/console.md shows). */
export async function screenshot(page: Page, name: string): Promise<void> {
  fs.mkdirSync(SCREENSHOT_DIR, { recursive: true });
  await page.screenshot({ path: path.join(SCREENSHOT_DIR, `${name}.png`), fullPage: true });
  await page.screenshot({ path: path.join(SCREENSHOT_DIR, `${name}.jpg`), type: 'jpeg', quality: 60 });
}

/** A real server and a browser for one describe block, both stopped after it. */
export function consoleSuite(options: TestServerOptions = {}): { readonly test: TestServer; readonly browser: Browser } {
  const suite = {} as { test: TestServer; browser: Browser };
  beforeAll(async () => {
    suite.test = await startTestServer(options);
    suite.browser = await launchBrowser();
  });
  afterAll(async () => {
    await suite.browser?.close();
    await suite.test?.stop();
  });
  return suite;
}
