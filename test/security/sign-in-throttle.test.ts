import http from 'node:http';
import { randomBytes } from 'node:crypto';
import { startTestServer, type TestServer } from '../support/test-server';

const REDEEM = 'mutation($token: String!) { redeemSignInLink(token: $token) { workspaceId apiKey } }';
const PER_CLIENT = 10; // the default
const PER_SERVER = 20;

interface Answer {
  status: number;
  retryAfter: string | undefined;
  code: string | undefined;
  message: string;
  apiKey: string | undefined;
}

/** One anonymous sign-in attempt over a connection from `localAddress` (each 127.0.0.0/8 address is another client). */
function redeemFrom(url: string, localAddress: string, token: string, headers: Record<string, string> = {}): Promise<Answer> {
  const body = JSON.stringify({ query: REDEEM, variables: { token } });
  return new Promise((resolve, reject) => {
    const request = http.request(`${url}/graphql`, {
      method: 'POST', localAddress, agent: false,
      headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), ...headers },
    }, (response) => {
      let text = '';
      response.setEncoding('utf8');
      response.on('data', (chunk) => { text += chunk; });
      response.on('end', () => {
        const json = JSON.parse(text);
        resolve({
          status: response.statusCode!, retryAfter: response.headers['retry-after'] as string | undefined,
          code: json.errors?.[0]?.extensions?.code, message: json.errors?.[0]?.message ?? '', apiKey: json.data?.redeemSignInLink?.apiKey,
        });
      });
    });
    request.on('error', reject);
    request.end(body);
  });
}

/** A well-formed link token that matches no link: each admitted attempt runs the one UPDATE that would spend a link. */
const unknownToken = () => `csl-${randomBytes(32).toString('base64url')}`;

/**
 * Anonymous `redeemSignInLink` was unthrottled: one client made 1,417 attempts a second, each a
 * database query. Attempts are now counted per client (the socket's address; forwarding headers
 * change nothing) and per server, and refused with 429 RATE_LIMITED and Retry-After before
 * any query; another client is still served.
 */
describe('anonymous sign-in is throttled per client and per server, before the database', () => {
  let test: TestServer;
  let signInQueries: () => number;

  beforeAll(async () => {
    test = await startTestServer({ controlPlane: { localAgents: false, consoleSignInPerServerPerMinute: PER_SERVER } });
    // The sign-in's database work, counted where it is issued (SignInLinks queries through the DataSource).
    const query = jest.spyOn(test.server.controlPlane.dataSource, 'query');
    signInQueries = () => query.mock.calls.filter(([sql]) => String(sql).includes('console_sign_in_links') && !String(sql).startsWith('INSERT')).length;
  });

  afterAll(async () => {
    jest.restoreAllMocks();
    await test?.stop();
  });

  it('a burst from one client is 429 past its allowance, with no query for the refused; another client signs in; the server\'s own limit holds', async () => {
    expect(test.server.controlPlane.config.consoleSignInPerClientPerMinute).toBe(PER_CLIENT);

    // 40 at once from 127.0.0.1, half of them claiming to forward for someone else.
    const burst = await Promise.all(Array.from({ length: 40 }, (_, index) => redeemFrom(test.url, '127.0.0.1', unknownToken(),
      index % 2 ? { 'x-forwarded-for': `198.51.100.${index}`, 'x-real-ip': `203.0.113.${index}`, forwarded: `for=192.0.2.${index}` } : {})));
    const served = burst.filter((answer) => answer.code === 'UNAUTHENTICATED');
    const refused = burst.filter((answer) => answer.code === 'RATE_LIMITED');
    expect([served.length, refused.length]).toEqual([PER_CLIENT, 40 - PER_CLIENT]);
    for (const answer of refused) {
      expect(answer.status).toBe(429);
      expect(Number(answer.retryAfter)).toBeGreaterThanOrEqual(1);
      expect(Number(answer.retryAfter)).toBeLessThanOrEqual(60);
      expect(answer.message).toContain('CONSOLE_SIGN_IN_PER_CLIENT_PER_MINUTE');
    }
    expect(signInQueries()).toBe(PER_CLIENT);

    // Another client (127.0.0.2) spends a real link.
    const workspace = await test.createWorkspace();
    const { token } = await test.server.controlPlane.signInLinks.issue(workspace.workspaceId);
    const other = await redeemFrom(test.url, '127.0.0.2', token);
    expect(other).toMatchObject({ status: 200, code: undefined });
    expect(other.apiKey).toMatch(/^\S+$/);
    expect(signInQueries()).toBe(PER_CLIENT + 1);

    // A third client meets the server's limit: 11 of 20 are taken, so 9 more are served and the rest refused.
    const third = await Promise.all(Array.from({ length: 10 }, () => redeemFrom(test.url, '127.0.0.3', unknownToken())));
    expect(third.filter((answer) => answer.code === 'UNAUTHENTICATED')).toHaveLength(PER_SERVER - PER_CLIENT - 1);
    const overServer = third.filter((answer) => answer.code === 'RATE_LIMITED');
    expect(overServer).toHaveLength(1);
    expect(overServer[0]).toMatchObject({ status: 429, message: expect.stringContaining('CONSOLE_SIGN_IN_PER_SERVER_PER_MINUTE') });
    expect(signInQueries()).toBe(PER_SERVER);
  });
});
