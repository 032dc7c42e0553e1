/**
 * HTTP calls for fault tests that must see exactly what a client sees: a bounded time (a
 * request that does not answer in time is an outcome, `timedOut`, not a test timeout), a
 * connection error as an outcome too, and by default a fresh connection per call, so a
 * killed backend's keep-alive socket cannot decide the result.
 */
import http from 'node:http';

export interface CallResult {
  /** HTTP status, or 0 when no response came (connection error or timeout). */
  readonly status: number;
  readonly body: any;
  readonly text: string;
  readonly headers: http.IncomingHttpHeaders;
  readonly ms: number;
  /** The connection failed (reset, refused) before a full response. */
  readonly error?: string;
  readonly timedOut: boolean;
}

export interface CallOptions {
  readonly method?: string;
  readonly headers?: Record<string, string>;
  readonly body?: unknown;
  readonly timeoutMs?: number;
  /** A keep-alive agent to reuse connections; default: a new connection, closed after the call. */
  readonly agent?: http.Agent;
}

export function call(url: string, options: CallOptions = {}): Promise<CallResult> {
  const startedAt = performance.now();
  const payload = options.body === undefined ? undefined : Buffer.from(typeof options.body === 'string' ? options.body : JSON.stringify(options.body));
  return new Promise((resolve) => {
    let settled = false;
    const done = (result: Omit<CallResult, 'ms'>) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve({ ...result, ms: performance.now() - startedAt });
    };
    const request = http.request(url, {
      method: options.method ?? (payload ? 'POST' : 'GET'),
      agent: options.agent ?? false,
      headers: { ...(payload ? { 'content-type': 'application/json', 'content-length': String(payload.length) } : {}), ...options.headers },
    }, (response) => {
      const parts: Buffer[] = [];
      response.on('data', (part: Buffer) => parts.push(part));
      response.on('error', (error) => done({ status: 0, body: null, text: '', headers: {}, error: error.message, timedOut: false }));
      response.on('end', () => {
        const text = Buffer.concat(parts).toString('utf8');
        let body: unknown = null;
        try {
          body = text ? JSON.parse(text) : null;
        } catch {
          body = text;
        }
        done({ status: response.statusCode ?? 0, body, text, headers: response.headers, timedOut: false });
      });
    });
    const timer = setTimeout(() => {
      done({ status: 0, body: null, text: '', headers: {}, error: 'timed out', timedOut: true });
      request.destroy();
    }, options.timeoutMs ?? 10_000);
    request.on('error', (error) => done({ status: 0, body: null, text: '', headers: {}, error: error.message, timedOut: false }));
    request.end(payload);
  });
}

/** A GraphQL operation over `call`. */
export function graphqlCall(baseUrl: string, apiKey: string, query: string, variables: Record<string, unknown> = {}, options: CallOptions = {}): Promise<CallResult> {
  return call(`${baseUrl}/graphql`, { ...options, headers: { authorization: `Bearer ${apiKey}`, ...options.headers }, body: { query, variables } });
}

/** OpenAI's error body: `{error: {message, type, param, code}}`, every key present, message and type non-empty. */
export function isOpenAiError(body: unknown): boolean {
  const error = (body as { error?: Record<string, unknown> } | null)?.error;
  return !!error && typeof error === 'object'
    && typeof error.message === 'string' && error.message.length > 0
    && typeof error.type === 'string' && error.type.length > 0
    && 'param' in error && 'code' in error;
}

/** Percentile (0–100) of a list of numbers; NaN for an empty list. */
export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((left, right) => left - right);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))];
}
