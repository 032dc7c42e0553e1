import { consoleSuite, newPage, screenshot, seriousAccessibilityViolations, signIn } from './support/browser';

describe('console: sign in', () => {
  const suite = consoleSuite();

  it('a wrong key is refused with the API\'s own words; a right one signs in, kept in session storage and never in the URL', async () => {
    const workspace = await suite.test.createWorkspace();
    const page = await newPage(suite.browser, suite.test.url);
    await page.goto('/console/');
    expect(await seriousAccessibilityViolations(page)).toEqual([]);
    await screenshot(page, 'sign-in');
    await page.getByLabel('Workspace API key').fill('mk-not-a-key');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('alert').filter({ hasText: 'incorrect API key provided' }).waitFor();

    await signIn(page, workspace.apiKey);
    expect(page.url()).not.toContain(workspace.apiKey);
    expect(await page.evaluate(() => sessionStorage.getItem('console.apiKey'))).toBe(workspace.apiKey);
    expect(await page.evaluate(() => localStorage.length)).toBe(0);
  });

  it('a one-time sign-in link signs in once: the token leaves the address bar, and a second use is refused', async () => {
    const workspace = await suite.test.createWorkspace();
    const { token } = await suite.test.server.controlPlane.signInLinks.issue(workspace.workspaceId);
    const page = await newPage(suite.browser, suite.test.url);
    await page.goto(`/console/#sign-in=${token}`);
    await page.getByRole('navigation', { name: 'Main' }).waitFor();
    expect(page.url()).not.toContain(token);

    const again = await newPage(suite.browser, suite.test.url);
    await again.goto(`/console/#sign-in=${token}`);
    await again.getByRole('alert').filter({ hasText: 'The sign-in link did not work' }).waitFor();
    expect(await again.getByRole('navigation', { name: 'Main' }).count()).toBe(0);
  });
});
