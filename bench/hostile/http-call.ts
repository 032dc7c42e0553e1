/** One HTTP request to the server under test, timed, for the ordinary tenant and the attackers alike. */
import http from 'node:http';
import { codeOf } from './attack';

export interface Answer {
  /** performance.now() when it was sent. */
  readonly startedAt: number;
  readonly ms: number;
  /** 0 when there was no HTTP answer (`error` says why: a connection error's code, or `timeout`). */
  readonly status: number;
  /** The first 64 KiB of the body. */
  readonly text: string;
  /** Why it is not a success: the error code of a non-2xx answer or of a GraphQL error, a connection error, `timeout`. */
  readonly error?: string;
}

export interface CallOptions {
  readonly port: number;
  readonly method: string;
  readonly path: string;
  readonly headers?: http.OutgoingHttpHeaders;
  readonly body?: string | Buffer | Buffer[];
  /** A keep-alive agent; none: a new connection for this request alone. */
  readonly agent?: http.Agent;
  readonly timeoutMs: number;
}

const KEEP = 64 * 1024;

export function call(options: CallOptions): Promise<Answer> {
  return new Promise((resolve) => {
    const startedAt = performance.now();
    let settled = false;
    const finish = (status: number, text: string, error?: string) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve({ startedAt, ms: performance.now() - startedAt, status, text, error });
    };
    const parts = options.body === undefined ? [] : Array.isArray(options.body) ? options.body : [options.body];
    const length = parts.reduce((sum, part) => sum + Buffer.byteLength(part), 0);
    const headers = options.body === undefined ? options.headers : { ...options.headers, 'content-length': length };
    const request = http.request({ host: '127.0.0.1', port: options.port, path: options.path, method: options.method, agent: options.agent ?? false, headers }, (response) => {
      let text = '';
      response.setEncoding('utf8');
      response.on('data', (part: string) => {
        if (text.length < KEEP) text += part.slice(0, KEEP - text.length);
      });
      response.on('end', () => {
        const status = response.statusCode ?? 0;
        finish(status, text, status >= 200 && status < 300 ? graphQLErrorOf(text) : `${codeOf(text) || text.slice(0, 60)}`);
      });
      response.on('error', (error: NodeJS.ErrnoException) => finish(response.statusCode ?? 0, text, `cut: ${error.code ?? error.message}`));
    });
    const timer = setTimeout(() => {
      finish(0, '', 'timeout');
      request.destroy();
    }, options.timeoutMs);
    request.on('error', (error: NodeJS.ErrnoException) => finish(0, '', error.code ?? error.message));
    for (const part of parts) request.write(part);
    request.end();
  });
}

/** A 200 whose body carries GraphQL `errors` is a refusal too: its first error's code. */
function graphQLErrorOf(text: string): string | undefined {
  if (!text.startsWith('{"errors"') && !text.includes('"errors":[')) return undefined;
  return `GraphQL ${/"code"\s*:\s*"([^"]{1,60})"/.exec(text)?.[1] ?? 'error'}`;
}

/** POST /graphql with a bearer token. */
export function graphql(port: number, token: string, query: string, variables: Record<string, unknown>, options: { agent?: http.Agent; timeoutMs: number }): Promise<Answer> {
  return call({
    port, method: 'POST', path: '/graphql', agent: options.agent, timeoutMs: options.timeoutMs,
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: JSON.stringify({ query, variables }),
  });
}

/** A multipart/form-data body of `purpose=batch` and one `file`: [head, data, tail], and its content type. */
export function multipartFile(data: Buffer, filename: string): { parts: Buffer[]; contentType: string } {
  const boundary = `bench-hostile-${Math.random().toString(16).slice(2)}`;
  const head = Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="purpose"\r\n\r\nbatch\r\n` +
    `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="${filename}"\r\nContent-Type: application/jsonl\r\n\r\n`);
  const tail = Buffer.from(`\r\n--${boundary}--\r\n`);
  return { parts: [head, data, tail], contentType: `multipart/form-data; boundary=${boundary}` };
}
