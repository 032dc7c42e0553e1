import type { Page } from 'playwright-core';
import { consoleSuite, signIn } from './support/browser';

/**
 * The console under its own Content-Security-Policy (the other console tests bypass it, to
 * inject axe-core): its subscriptions reach this origin over graphql-ws, 'self' alone would be
 * enough for Chromium (CSP Level 3), and a WebSocket to any other host is refused.
 */
describe('console: Content-Security-Policy', () => {
  const suite = consoleSuite({ controlPlane: { localAgents: false } });

  /** A tab that enforces the console's policy (newPage bypasses it), and the CSP complaints it logs. */
  async function enforcingPage(): Promise<{ page: Page; violations: string[] }> {
    const context = await suite.browser.newContext({ baseURL: suite.test.url });
    const page = await context.newPage();
    page.setDefaultTimeout(15_000);
    const violations: string[] = [];
    page.on('console', (message) => {
      if (message.text().includes('Content Security Policy')) violations.push(message.text());
    });
    return { page, violations };
  }

  /** What a WebSocket to `url` opened from the page comes to: opened, refused by the policy, or failed otherwise. */
  async function openSocket(page: Page, url: string): Promise<string> {
    return await page.evaluate((target) => new Promise<string>((resolve) => {
      document.addEventListener('securitypolicyviolation', (event) => resolve(`refused by ${event.effectiveDirective}`), { once: true });
      try {
        const socket = new WebSocket(target, 'graphql-transport-ws');
        socket.onopen = () => resolve('opened');
        socket.onerror = () => setTimeout(() => resolve('failed'), 200);
      } catch (error) {
        resolve(`refused: ${(error as Error).name}`);
      }
      setTimeout(() => resolve('no outcome'), 5_000);
    }), url);
  }

  it('subscriptions connect over graphql-ws under the policy as served: the page shows a change from a graphql-ws frame', async () => {
    const { page, violations } = await enforcingPage();
    const workspace = await suite.test.createWorkspace();
    const deployment = await suite.test.createDeployment(workspace, { provider: 'external' });
    await signIn(page, workspace.apiKey);
    const frames: string[] = [];
    page.on('websocket', (socket) => socket.on('framereceived', ({ payload }) => frames.push(String(payload))));
    await page.goto(`/console/deployments/${deployment.id}`);
    await page.getByRole('status', { name: 'Status: Creating' }).waitFor();
    await suite.test.server.controlPlane.deployments.pause(workspace.workspaceId, deployment.id);
    await page.getByRole('status', { name: 'Status: Paused' }).waitFor();
    expect(frames.some((frame) => frame.includes('"type":"next"') && frame.includes('Paused'))).toBe(true);
    expect(violations).toEqual([]);
  });

  it('connect-src \'self\' alone covers the page\'s own ws: (CSP Level 3), so the spelled-out host is only for older browsers', async () => {
    const own = `${suite.test.url.replace(/^http/, 'ws')}/graphql`;
    // A policy added by a <meta> element is enforced on top of the served one: 'none' shows it is, 'self' that it lets the socket through.
    const outcomes: Record<string, string> = {};
    for (const policy of ["connect-src 'none'", "connect-src 'self'"]) {
      const { page } = await enforcingPage();
      await page.goto('/console/');
      await page.evaluate((content) => {
        const meta = document.createElement('meta');
        meta.httpEquiv = 'Content-Security-Policy';
        meta.content = content;
        document.head.append(meta);
      }, policy);
      outcomes[policy] = await openSocket(page, own);
      await page.context().close();
    }
    expect(outcomes).toEqual({ "connect-src 'none'": expect.stringMatching(/^refused/), "connect-src 'self'": 'opened' });
  });

  it('a WebSocket to another host (even this server under another name) is refused by the policy', async () => {
    const { page } = await enforcingPage();
    await page.goto('/console/');
    expect(await openSocket(page, `${suite.test.url.replace(/^http/, 'ws')}/graphql`)).toBe('opened');
    expect(await openSocket(page, `ws://localhost:${new URL(suite.test.url).port}/graphql`)).toMatch(/^refused/);
  });
});
