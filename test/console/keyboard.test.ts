import type { Page } from 'playwright-core';
import { consoleSuite, newPage, screenshot, seriousAccessibilityViolations } from './support/browser';

/** Tab until the focused element matches, as a keyboard user would; fails after `limit` presses. */
async function tabTo(page: Page, matches: (element: { tag: string; text: string; label: string | null }) => boolean, limit = 40): Promise<void> {
  for (let presses = 0; presses < limit; presses++) {
    await page.keyboard.press('Tab');
    const focused = await page.evaluate(() => {
      const element = document.activeElement as HTMLElement | null;
      return element ? { tag: element.tagName.toLowerCase(), text: element.innerText ?? '', label: element.getAttribute('aria-label') ?? element.id ?? null } : null;
    });
    if (focused && matches(focused)) return;
  }
  throw new Error(`nothing matching was reached in ${limit} Tab presses`);
}

describe('console: keyboard only', () => {
  const suite = consoleSuite();

  it('signs in and reaches every page from the navigation with Tab and Enter alone; each passes axe-core', async () => {
    const workspace = await suite.test.createWorkspace();
    await suite.test.createDeployment(workspace);
    const page = await newPage(suite.browser, suite.test.url);
    await page.goto('/console/');
    await tabTo(page, (element) => element.tag === 'input' && element.label === 'api-key');
    await page.keyboard.type(workspace.apiKey);
    await page.keyboard.press('Enter');
    await page.getByRole('navigation', { name: 'Main' }).waitFor();

    for (const [link, heading] of [['API keys', 'API keys'], ['Webhooks', 'Webhooks'], ['Requests', 'Requests'], ['Batches', 'Batches'], ['Usage and billing', 'Usage and billing'],
      ['Shared models', 'Shared models'], ['Adapters', 'Adapters'], ['Catalog', 'Catalog'], ['Deployments', 'Deployments']] as const) {
      await page.evaluate(() => (document.activeElement as HTMLElement | null)?.blur());
      await tabTo(page, (element) => element.tag === 'a' && element.text.trim() === link);
      await page.keyboard.press('Enter');
      await page.getByRole('heading', { level: 1, name: heading }).waitFor();
      await page.getByText(/^Loading/).first().waitFor({ state: 'detached' }).catch(() => undefined);
      expect({ page: heading, violations: await seriousAccessibilityViolations(page) }).toEqual({ page: heading, violations: [] });
    }
    await page.getByRole('link', { name: 'meta-llama/Llama-3.1-8B-Instruct' }).waitFor();
    await screenshot(page, 'deployments');
  });
});
