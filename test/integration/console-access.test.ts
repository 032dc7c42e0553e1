import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { graphqlClient } from '../capacity/support/graphql-client';
import { startTestServer, type TestServer } from '../support/test-server';

const REDEEM = 'mutation($token: String!) { redeemSignInLink(token: $token) { workspaceId apiKey } }';

/** The console's server side: the built app at /console and one-time sign-in links (the browser suite is test/console). */
describe('console access', () => {
  let test: TestServer;
  let consoleDir: string;

  beforeAll(async () => {
    // A stand-in build: this suite tests the route, not Vite's output (the browser suite serves the real build).
    consoleDir = fs.mkdtempSync(path.join(os.tmpdir(), 'console-build-'));
    fs.mkdirSync(path.join(consoleDir, 'assets'));
    fs.writeFileSync(path.join(consoleDir, 'index.html'), '<!doctype html><title>console</title>');
    fs.writeFileSync(path.join(consoleDir, 'assets', 'index-abc123.js'), 'console.log(1)');
    // The default link lifetime: a 1 s one could run out between issuing and redeeming on a loaded
    // machine. The expired case below ages its link in the table instead.
    test = await startTestServer({ gateway: { consoleDir } });
  });

  afterAll(async () => {
    await test?.stop();
    fs.rmSync(consoleDir, { recursive: true, force: true });
  });

  it('serves the app: hashed assets cached for a year, every other path the index (never cached), with a strict CSP', async () => {
    const asset = await fetch(`${test.url}/console/assets/index-abc123.js`);
    expect(asset.status).toBe(200);
    expect(asset.headers.get('content-type')).toMatch(/^text\/javascript/);
    expect(asset.headers.get('cache-control')).toBe('public, max-age=31536000, immutable');
    for (const route of ['/console/', '/console/deployments/dep_1', '/console/keys']) {
      const page = await fetch(`${test.url}${route}`);
      expect(page.status).toBe(200);
      expect(await page.text()).toContain('<title>console</title>');
      expect(page.headers.get('cache-control')).toBe('no-cache');
      expect(page.headers.get('content-security-policy')).toContain("script-src 'self'");
      expect(page.headers.get('content-security-policy')).toContain("frame-ancestors 'none'");
    }
    const bare = await fetch(`${test.url}/console`, { redirect: 'manual' });
    expect([bare.status, bare.headers.get('location')]).toEqual([302, '/console/']);
  });

  it('refuses what is not the app: unknown assets, paths leaving the folder, and writes', async () => {
    expect((await fetch(`${test.url}/console/assets/nope.js`)).status).toBe(404);
    expect((await fetch(`${test.url}/console/assets/..%2f..%2fpackage.json`)).status).toBe(404);
    const post = await fetch(`${test.url}/console/`, { method: 'POST' });
    expect([post.status, post.headers.get('allow')]).toEqual([405, 'GET, HEAD']);
  });

  it('a sign-in link is spent by its first use, for a new key of its workspace named "console sign-in"', async () => {
    const workspace = await test.createWorkspace();
    const { token } = await test.server.controlPlane.signInLinks.issue(workspace.workspaceId);
    const anonymous = graphqlClient(test.url, '');
    // Two redemptions at once (two tabs): exactly one wins.
    const [first, second] = await Promise.all([anonymous(REDEEM, { token }), anonymous(REDEEM, { token })]);
    const won = [first, second].filter((result) => result.data);
    const lost = [first, second].filter((result) => result.errors);
    expect([won.length, lost.length]).toEqual([1, 1]);
    expect(won[0].data.redeemSignInLink.workspaceId).toBe(workspace.workspaceId);
    expect(lost[0].errors![0]).toMatchObject({ message: expect.stringMatching(/sign-in link is not valid/), extensions: { code: 'UNAUTHENTICATED', param: 'token' } });

    const key = won[0].data.redeemSignInLink.apiKey as string;
    const keys = await graphqlClient(test.url, key)('{ apiKeys { name } }');
    expect(keys.data.apiKeys.map((item: { name: string }) => item.name).sort()).toEqual(['console sign-in', 'test key']);
  });

  it('an expired, unknown or malformed token is refused the same way', async () => {
    const workspace = await test.createWorkspace();
    const { token } = await test.server.controlPlane.signInLinks.issue(workspace.workspaceId);
    await test.server.controlPlane.dataSource.query(`UPDATE console_sign_in_links SET expires_at = now() - interval '1 second' WHERE workspace_id = $1`, [workspace.workspaceId]);
    const anonymous = graphqlClient(test.url, '');
    for (const attempt of [token, 'csl-unknown', 'mk-not-a-link', '']) {
      const result = await anonymous(REDEEM, { token: attempt });
      expect(result.errors?.[0].extensions).toEqual({ code: 'UNAUTHENTICATED', param: 'token' });
    }
  });
});
