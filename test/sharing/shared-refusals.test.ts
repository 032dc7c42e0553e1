import http from 'node:http';
import { PostgresQueryRunner } from 'typeorm/driver/postgres/PostgresQueryRunner';
import { waitFor } from '../support/test-server';
import { SHARED_ID, slowChat, startSharingFixture, type SharingFixture } from './support/sharing-fixture';

interface Statement {
  readonly sql: string;
  /** Run on an HTTP request's behalf: a frame of the gateway in its (async) stack. Background loops run from their timers. */
  readonly onRequestPath: boolean;
}

/** Every SQL statement the server runs while `during` runs (all of it goes through TypeORM's query runner), and where from. */
async function statementsDuring(during: () => Promise<void>): Promise<Statement[]> {
  const seen: Statement[] = [];
  const original = PostgresQueryRunner.prototype.query;
  const stackLimit = Error.stackTraceLimit;
  // Deep enough to reach the Koa handler from TypeORM's query runner.
  Error.stackTraceLimit = 100;
  PostgresQueryRunner.prototype.query = function (this: PostgresQueryRunner, query: string, ...rest: unknown[]) {
    seen.push({ sql: query.replace(/\s+/g, ' ').trim(), onRequestPath: /[\\/]gateway[\\/]/.test(new Error().stack ?? '') });
    return (original as (...args: unknown[]) => unknown).call(this, query, ...rest);
  } as typeof original;
  try {
    await during();
  } finally {
    PostgresQueryRunner.prototype.query = original;
    Error.stackTraceLimit = stackLimit;
  }
  return seen;
}

/** How many times the process JSON.parse'd a text containing `marker` while `during` ran (a request body's parse; the scan does not parse). */
async function parsesDuring(marker: string, during: () => Promise<void>): Promise<number> {
  let parses = 0;
  const original = JSON.parse;
  JSON.parse = ((text: string, reviver?: (key: string, value: unknown) => unknown) => {
    if (typeof text === 'string' && text.includes(marker)) parses++;
    return original(text, reviver);
  }) as typeof JSON.parse;
  try {
    await during();
  } finally {
    JSON.parse = original;
  }
  return parses;
}

/** What a guest's request touches when it is admitted or billed: none of it may run for a refusal. */
const GUEST_TABLES = /api_keys|workspaces|credit_reservations|billing_ledger|usage_records/;

/** One request on a given keep-alive agent; resolves with the status, the parsed body, the socket used and the connection header. */
function post(agent: http.Agent, url: string, key: string, body: string): Promise<{ status: number; body: any; socket: unknown; connection: string | undefined }> {
  return new Promise((resolve, reject) => {
    const target = new URL(url);
    const request = http.request({
      host: target.hostname, port: target.port, path: target.pathname, method: 'POST', agent,
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
    }, (response) => {
      let text = '';
      response.setEncoding('utf8');
      response.on('data', (part) => (text += part));
      response.on('end', () => {
        let parsed: unknown = text;
        try {
          parsed = JSON.parse(text);
        } catch {
          // an SSE stream or no body
        }
        resolve({ status: response.statusCode!, body: parsed, socket: request.socket, connection: response.headers.connection });
      });
    });
    request.on('error', reject);
    request.end(body);
  });
}

/**
 * Refusals on the shared endpoint cost no database round trip and no body parse (the pool, the
 * fair share and the guest's credit are known in memory), keep the connection open, and bad
 * input still gets its 4xx; one guest flooding cannot take every idle slot from another.
 */
describe('shared serving: cheap refusals and per-guest fairness', () => {
  let fixture: SharingFixture;
  let owner: { id: string; apiKey: string };
  let shared: { id: string; baseUrl: string };
  let url: string;

  beforeAll(async () => {
    fixture = await startSharingFixture();
    owner = await fixture.workspace('owner');
    shared = await fixture.sharedDeployment(owner.apiKey);
    await fixture.test.waitForReplicas(shared.id, 1);
    url = `${fixture.test.url}/shared/v1/chat/completions`;
  });

  afterAll(async () => {
    await fixture?.test.stop();
  });

  const chat = (fields: Record<string, unknown> = {}) => JSON.stringify({ model: SHARED_ID, messages: [{ role: 'user', content: 'hi' }], max_tokens: 2, ...fields });

  it('a full pool refuses with 429 and no database round trip, on one keep-alive connection; bad input still gets its 4xx', async () => {
    const guest = await fixture.workspace('flooding guest', '5');
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    const controller = new AbortController();
    const slow = Array.from({ length: 3 }, () => fixture.guestClient(guest.apiKey).chat.completions
      .create(slowChat(6_000) as any, { signal: controller.signal }).catch(() => null));
    try {
      await waitFor(() => fixture.test.server.controlPlane.dispatcher.connections(shared.id)[0]?.guestInFlight === 3, 5_000, 'guest slots taken');
      // Warm: the key is cached from here on (API_KEY_CACHE_TTL_MS); earlier usage records are written.
      expect((await post(agent, url, guest.apiKey, chat())).status).toBe(429);
      await fixture.test.server.controlPlane.usage.flush();
      const answers: Array<Awaited<ReturnType<typeof post>>> = [];
      let statements: Statement[] = [];
      const parses = await parsesDuring('refused-attempt', async () => {
        statements = await statementsDuring(async () => {
          for (let index = 0; index < 200; index++) answers.push(await post(agent, url, guest.apiKey, chat({ messages: [{ role: 'user', content: `refused-attempt ${index}` }] })));
        });
      });
      // Refused on what the scan of the raw body found: the body was never parsed.
      expect(parses).toBe(0);
      expect(new Set(answers.map((answer) => answer.status))).toEqual(new Set([429]));
      expect(answers[0].body.error).toMatchObject({ code: 'shared_pool_busy', type: 'rate_limit_error' });
      // The refusals ran no statement on keys, workspaces, credit, the ledger or usage: none per
      // attempt. Background loops may run theirs in the window on a loaded machine (the key
      // cache's re-read every API_KEY_CACHE_TTL_MS is 2, a lease give-back 4), hence one such
      // round, not zero, against 200 attempts.
      expect(statements.filter((statement) => GUEST_TABLES.test(statement.sql)).length).toBeLessThanOrEqual(6);
      // Nor any statement at all from the request path: one per attempt would be 200. Background
      // loops (the capacity loop, the shared pool's reload) run as many as the window is long
      // (111 to 455 on a loaded machine), so the window's total says nothing about the refusals.
      expect(statements.filter((statement) => statement.onRequestPath).map((statement) => statement.sql)).toEqual([]);
      // The same watch sees a statement a request does cause: a GraphQL read of the deployment.
      const read = await statementsDuring(async () => void await fixture.deployment(shared.id, owner.apiKey));
      expect(read.filter((statement) => statement.onRequestPath).length).toBeGreaterThan(0);
      // One connection for all of them: a refusal with its body read keeps the connection open.
      expect(new Set(answers.map((answer) => answer.socket)).size).toBe(1);
      expect(answers.every((answer) => answer.connection !== 'close')).toBe(true);

      // Bad input is still answered for what it is, with the OpenAI error body, even while the pool is full.
      const bad: Array<[string, number, string]> = [
        ['not json', 400, 'invalid_json'],
        ['{"model": 5, "messages": [{"role": "user", "content": "x"}]}', 400, 'invalid_request'],
        ['{"messages": [{"role": "user", "model": "shared/meta-llama/Llama-3.1-8B-Instruct"}]}', 400, 'invalid_request'],
        ['{"model": "shared/nobody/nothing", "messages": [{"role": "user", "content": "x"}]}', 404, 'model_not_found'],
        [`{"model": "shared/x", "messages": ${'['.repeat(200)}${']'.repeat(200)}}`, 400, 'invalid_request'],
        ['[1, 2, 3]', 400, 'invalid_request'],
      ];
      for (const [body, status, code] of bad) {
        const answer = await post(agent, url, guest.apiKey, body);
        expect({ body, status: answer.status, code: answer.body?.error?.code, type: typeof answer.body?.error?.message }).toEqual({ body, status, code, type: 'string' });
      }
    } finally {
      controller.abort();
      await Promise.all(slow);
      agent.destroy();
    }
  });

  it('a guest whose credit cannot hold the request is refused at 402 in memory after its first attempt', async () => {
    const poor = await fixture.workspace('poor guest', '0.0001');
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    try {
      await waitFor(() => fixture.test.server.controlPlane.dispatcher.connections(shared.id)[0]?.guestInFlight === 0, 10_000, 'guest slots free');
      // 100,000 tokens at 0.18 per 1M: 0.018, far above 0.0001. The first attempt reads the credit (one transaction).
      const first = await post(agent, url, poor.apiKey, chat({ max_tokens: 100_000 }));
      expect(first.status).toBe(402);
      // Earlier tests' usage records are written in the background: out of the way first.
      await fixture.test.server.controlPlane.usage.flush();
      const answers: number[] = [];
      let statements: string[] = [];
      const parses = await parsesDuring('poor-attempt', async () => {
        statements = await statementsDuring(async () => {
          for (let index = 0; index < 100; index++) {
            answers.push((await post(agent, url, poor.apiKey, chat({ max_tokens: 100_000, messages: [{ role: 'user', content: 'poor-attempt' }] }))).status);
          }
        });
      });
      expect(parses).toBe(0);
      expect(new Set(answers)).toEqual(new Set([402]));
      // None per attempt. A background transaction may fall in the window on a loaded machine
      // (the settle loop giving back a lease idle for SHARED_CREDIT_LEASE_IDLE_MS: 4 statements
      // once beside the whole suite), so the bound is one such transaction, not zero.
      expect(statements.filter((sql) => GUEST_TABLES.test(sql)).length).toBeLessThanOrEqual(6);
      // What the credit can hold is still served.
      const paid = await post(agent, url, poor.apiKey, chat({ max_tokens: 2 }));
      expect(paid.status).toBe(200);
    } finally {
      agent.destroy();
    }
  });

  it('two guests at 1:10 attempt rates for 3 guest slots: the smaller is served at least 30 % of the guest requests (the benchmark asks 40 %)', async () => {
    const small = await fixture.workspace('small guest', '5');
    const flood = await fixture.workspace('flooding guest 2', '5');
    await waitFor(() => fixture.test.server.controlPlane.dispatcher.connections(shared.id)[0]?.guestInFlight === 0, 10_000, 'guest slots free');
    const served = { small: 0, flood: 0 };
    const attempts = { small: 0, flood: 0 };
    const deadline = Date.now() + 6_000;
    // Closed loops that retry 10 ms after a 429: 3 loops for the small guest, 30 for the flood.
    const loop = (who: 'small' | 'flood', key: string) => async () => {
      const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
      try {
        while (Date.now() < deadline) {
          attempts[who]++;
          const answer = await post(agent, url, key, JSON.stringify({ ...slowChat(250, 1), model: SHARED_ID }));
          if (answer.status === 200) served[who]++;
          else await new Promise((resolve) => setTimeout(resolve, 10));
        }
      } finally {
        agent.destroy();
      }
    };
    await Promise.all([
      ...Array.from({ length: 3 }, loop('small', small.apiKey)),
      ...Array.from({ length: 30 }, loop('flood', flood.apiKey)),
    ]);
    const share = served.small / (served.small + served.flood);
    const detail = JSON.stringify({ served, attempts, share });
    expect(served.small + served.flood).toBeGreaterThan(20);
    // Attempts were lopsided (most of the flood's refused), service was not.
    expect(attempts.flood).toBeGreaterThan(5 * attempts.small);
    // The target (≥ 40 %) is measured by `npm run bench:shared`; beside the whole suite on
    // 2 cores this test once saw 38.7 %. Shared by attempts, the small guest would get ~9 %; 30 %
    // still tells a fair share from that without failing on a loaded machine.
    expect({ detail, fair: share >= 0.3 }).toEqual({ detail, fair: true });
  });
});
