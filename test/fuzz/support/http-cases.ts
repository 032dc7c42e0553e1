import fc from 'fast-check';
import { Agent, type Dispatcher } from 'undici';
import type { HttpAnswer } from './answer-checks';
import type { FuzzTarget } from './fuzz-target';

/** Who a case calls as; resolved to an Authorization header when it is sent. */
export type Caller = 'owner' | 'guest' | 'operator' | 'none' | { header: string };

/** A path segment: text (percent-encoded as sent), or the id of a request record the fuzz created earlier. */
export type PathId = { text: string } | { recordIndex: number };

/** One HTTP request of the fuzz, as generated (pure data: fast-check prints it when a case fails). */
export interface HttpCase {
  route: string;
  method: string;
  /** May hold `{id}`, replaced by `id` when sent. */
  path: string;
  id?: PathId;
  caller: Caller;
  headers?: Record<string, string>;
  body?: Buffer;
}

const printable = fc.string({ unit: fc.integer({ min: 0x21, max: 0x7e }).map((code) => String.fromCharCode(code)), maxLength: 60 });

/** Mostly `main`; otherwise no header, another caller, or a malformed or unknown token. */
export function callerArbitrary(main: Caller): fc.Arbitrary<Caller> {
  return fc.oneof(
    { arbitrary: fc.constant(main), weight: 24 },
    { arbitrary: fc.constantFrom<Caller>('none', 'owner', 'guest', 'operator'), weight: 2 },
    {
      arbitrary: fc.oneof(
        fc.constantFrom('Bearer', 'Bearer ', 'bearer mk-', 'Basic dXNlcjpwYXNz', 'Bearer mk-x mk-y', 'mk-abc', 'Bearer\tmk-abc', `Bearer mk-${'A'.repeat(200)}`),
        printable.map((token) => `Bearer mk-${token}`),
        printable.map((token) => `Bearer ${token}`),
        // Printable ASCII only: header bytes past 0x7e are the raw-socket property's (undici refuses some).
        fc.string({ unit: fc.integer({ min: 0x20, max: 0x7e }).map((code) => String.fromCharCode(code)), maxLength: 40 }),
      ).map((header) => ({ header })),
      weight: 1,
    },
  );
}

/** Percent-encodes every byte of the UTF-8 form outside unreserved characters (lone surrogates become U+FFFD, as on the wire). */
export function encodeSegment(text: string): string {
  return [...Buffer.from(text, 'utf8')].map((byte) => (/[A-Za-z0-9_.~-]/.test(String.fromCharCode(byte)) ? String.fromCharCode(byte) : `%${byte.toString(16).toUpperCase().padStart(2, '0')}`)).join('');
}

/** Path segments as clients break them: broken percent-encoding, encoded slashes and dots, NUL, overlong UTF-8. */
export const rawSegment: fc.Arbitrary<string> = fc.oneof(
  fc.constantFrom('%', '%z', '%zz', '%g0', '%c3', '%e2%82', '%ff', '%c0%af', '%ed%a0%80', '%00', '%2F', '%2f..%2f', '..', '.', '%2e%2e', '', '%20', '+', 'a%2Fb', '%25', '%u0041'),
  fc.string({ unit: fc.constantFrom('a', 'Z', '0', '-', '_', '.', '~', '%', '2', 'f', 'F', 'c', '3', 'z', '!', '$', '&', "'", '(', ')', '*', ',', ';', '=', ':', '@'), maxLength: 12 }),
);

const newAgent = () => new Agent({ connections: 4, pipelining: 1, keepAliveTimeout: 30_000, headersTimeout: 10_000, bodyTimeout: 10_000 });

/** Every case is answered in milliseconds; one without an answer in this long hangs. */
const ANSWER_TIMEOUT_MS = 10_000;

export class HttpSender {
  private dispatcher = newAgent();

  constructor(private readonly target: FuzzTarget) {}

  authorization(caller: Caller): string | undefined {
    if (caller === 'none') return undefined;
    if (typeof caller === 'object') return caller.header;
    if (caller === 'operator') return `Bearer ${this.target.operatorToken}`;
    return `Bearer ${caller === 'guest' ? this.target.guest.apiKey : this.target.owner.apiKey}`;
  }

  /**
   * The path as sent: `{id}` filled in, and any byte a request line cannot carry (space,
   * controls, non-ASCII) percent-encoded as a browser would (undici refuses such a path, and
   * after a few refusals its pool stopped sending anything).
   */
  resolvePath(testCase: HttpCase): string {
    const ids = this.target.requestIds;
    const id = !testCase.id ? '' : 'text' in testCase.id ? testCase.id.text : encodeSegment(ids.length ? ids[testCase.id.recordIndex % ids.length] : 'req_000000000000000000000000');
    const path = testCase.id ? testCase.path.replace('{id}', id) : testCase.path;
    return [...Buffer.from(path, 'utf8')].map((byte) => (byte > 0x20 && byte < 0x7f ? String.fromCharCode(byte) : `%${byte.toString(16).toUpperCase().padStart(2, '0')}`)).join('');
  }

  async send(testCase: HttpCase): Promise<HttpAnswer> {
    const headers: Record<string, string> = { ...testCase.headers };
    const authorization = this.authorization(testCase.caller);
    if (authorization !== undefined) headers.authorization = authorization;
    let response: Dispatcher.ResponseData;
    try {
      // The dispatcher's own request: the path goes out as written (no URL normalisation of `..` or `%zz`).
      response = await this.dispatcher.request({
        origin: this.target.url, path: this.resolvePath(testCase), method: testCase.method as Dispatcher.HttpMethod, headers,
        body: testCase.method === 'GET' || testCase.method === 'HEAD' ? undefined : testCase.body,
        // A request with no answer is given up and fails its case.
        signal: AbortSignal.timeout(ANSWER_TIMEOUT_MS),
      });
    } catch (error) {
      // After some failed requests an undici pool stopped sending anything: the next case starts on a fresh one.
      const stale = this.dispatcher;
      this.dispatcher = newAgent();
      void stale.destroy().catch(() => undefined);
      throw error;
    }
    const text = await response.body.text();
    const contentType = response.headers['content-type'];
    return { status: response.statusCode, contentType: Array.isArray(contentType) ? contentType.join(',') : contentType ?? '', text };
  }

  async close(): Promise<void> {
    await this.dispatcher.close();
  }
}

/** A short description of a case for failure messages (bodies cut to a readable length). */
export function describeCase(testCase: HttpCase, path: string): string {
  const body = testCase.body ? testCase.body.toString('utf8', 0, Math.min(testCase.body.length, 600)) : '';
  return `${testCase.method} ${path}\nheaders: ${JSON.stringify(testCase.headers ?? {})}\ncaller: ${JSON.stringify(testCase.caller)}\nbody (${testCase.body?.length ?? 0} bytes): ${JSON.stringify(body)}`;
}
