import http from 'node:http';
import net from 'node:net';
import WebSocket from 'ws';

/** The operator token of every server this suite starts (OPERATOR_TOKEN needs at least 24 characters). */
export const OPERATOR_TOKEN = 'op-security-suite-operator-token-7f3a9c';

export interface GraphQLError { message: string; extensions: { code: string; param?: string | null } }
export interface GraphQLAnswer {
  status: number;
  /** The raw body, for "no other tenant's data" checks. */
  text: string;
  body: { data?: any; errors?: GraphQLError[] };
}

/** GraphQL over HTTP; `authorization` is the whole header value (null: no header). */
export async function graphql(url: string, authorization: string | null, query: string, variables: Record<string, unknown> = {}): Promise<GraphQLAnswer> {
  const response = await fetch(`${url}/graphql`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(authorization === null ? {} : { authorization }) },
    body: JSON.stringify({ query, variables }),
  });
  const text = await response.text();
  return { status: response.status, text, body: JSON.parse(text) };
}

/** A GraphQL client bound to one bearer token. */
export function graphqlAs(url: string, token: string) {
  return (query: string, variables: Record<string, unknown> = {}) => graphql(url, `Bearer ${token}`, query, variables);
}

export interface HttpAnswer {
  status: number;
  headers: Headers;
  text: string;
  /** The body parsed as JSON, or null when it is not JSON. */
  json: any;
}

/** One REST call; `authorization` is the whole header value (null: no header). */
export async function call(method: string, url: string, authorization: string | null, body?: unknown, headers: Record<string, string> = {}): Promise<HttpAnswer> {
  const response = await fetch(url, {
    method,
    redirect: 'manual',
    headers: {
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      ...(authorization === null ? {} : { authorization }),
      ...headers,
    },
    body: body === undefined ? undefined : typeof body === 'string' ? body : Buffer.isBuffer(body) ? new Uint8Array(body) : JSON.stringify(body),
  });
  const text = await response.text();
  let json: any = null;
  try {
    json = text ? JSON.parse(text) : null;
  } catch {
    json = null;
  }
  return { status: response.status, headers: response.headers, text, json };
}

/** The OpenAI error body, exactly: `{error: {message, type, param, code}}` and nothing else. */
export function openAIError(answer: HttpAnswer): { status: number; type: string; code: string; param: string | null } {
  const error = answer.json?.error;
  const shapeOk = answer.json && Object.keys(answer.json).length === 1 && error && typeof error.message === 'string' && error.message.length > 0
    && Object.keys(error).sort().join(',') === 'code,message,param,type';
  return { status: answer.status, type: shapeOk ? error.type : `<not an OpenAI error body: ${answer.text.slice(0, 200)}>`, code: error?.code, param: error?.param ?? null };
}

/** The request line, headers and body sent verbatim on a fresh socket (no URL normalization, no header checks), read until the server closes. */
export function rawRequest(baseUrl: string, request: string | Buffer, timeoutMs = 10_000): Promise<{ status: number; head: string; body: string }> {
  const { hostname, port } = new URL(baseUrl);
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(port), hostname);
    const chunks: Buffer[] = [];
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`no answer within ${timeoutMs} ms`));
    }, timeoutMs);
    socket.on('data', (chunk) => chunks.push(chunk));
    socket.on('error', (error) => {
      // A server that answers and closes at once may reset the rest of a large request: keep the answer.
      if (chunks.length === 0) {
        clearTimeout(timer);
        reject(error);
      }
    });
    socket.on('close', () => {
      clearTimeout(timer);
      const text = Buffer.concat(chunks).toString('latin1');
      const [head, ...rest] = text.split('\r\n\r\n');
      resolve({ status: Number(/^HTTP\/1\.1 (\d{3})/.exec(head)?.[1] ?? 0), head, body: rest.join('\r\n\r\n') });
    });
    socket.write(request);
  });
}

/** A GET/HEAD/PUT with the path sent verbatim (`..`, `%2e%2e`, `\` reach the server as typed). */
export function verbatim(baseUrl: string, method: string, pathAndQuery: string, body?: Buffer): Promise<{ status: number; body: string }> {
  const { hostname, port } = new URL(baseUrl);
  return new Promise((resolve, reject) => {
    const request = http.request({ host: hostname, port: Number(port), method, path: pathAndQuery, agent: false }, (response) => {
      const chunks: Buffer[] = [];
      response.on('data', (chunk: Buffer) => chunks.push(chunk));
      response.on('end', () => resolve({ status: response.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }));
    });
    request.once('error', reject);
    request.end(body);
  });
}

/** What one graphql-ws subscription received so far. */
export interface LiveSubscription {
  /** `next` payloads with data. */
  readonly events: any[];
  /** `error` payloads, and `next` payloads that carry errors. */
  readonly errors: unknown[];
  /** The socket's close, when the server closed it. */
  closed: { code: number; reason: string } | null;
  /** Resolves once the server acknowledged the connection and the subscribe was sent (or the socket closed). */
  readonly ready: Promise<void>;
  stop(): void;
}

/** A subscription over the graphql-transport-ws protocol on a raw socket, kept open until `stop()`. */
export function subscribe(url: string, authorization: string, query: string, variables: Record<string, unknown> = {}): LiveSubscription {
  const socket = new WebSocket(`${url.replace(/^http/, 'ws')}/graphql`, 'graphql-transport-ws');
  let markReady: () => void = () => {};
  const live: LiveSubscription = {
    events: [], errors: [], closed: null,
    ready: new Promise<void>((resolve) => (markReady = resolve)),
    stop() {
      socket.removeAllListeners();
      socket.on('error', () => {});
      socket.terminate();
      markReady();
    },
  };
  socket.on('error', () => markReady());
  socket.on('open', () => socket.send(JSON.stringify({ type: 'connection_init', payload: { authorization } })));
  socket.on('close', (code, reason) => {
    live.closed = { code, reason: reason.toString() };
    markReady();
  });
  socket.on('message', (data) => {
    const message = JSON.parse(data.toString()) as { type: string; payload?: any };
    if (message.type === 'connection_ack') {
      socket.send(JSON.stringify({ id: '1', type: 'subscribe', payload: { query, variables } }));
      // The subscribe is registered on the server within a turn or two; give it a moment.
      setTimeout(markReady, 100);
    } else if (message.type === 'next') {
      if (message.payload?.errors) live.errors.push(message.payload.errors);
      if (message.payload?.data) live.events.push(message.payload.data);
    } else if (message.type === 'error') {
      live.errors.push(message.payload);
    } else if (message.type === 'ping') {
      socket.send(JSON.stringify({ type: 'pong' }));
    }
  });
  return live;
}

/** Every string in `values` that occurs in `text` (identifiers of another tenant that must never be shown). */
export function leaked(text: string, values: string[]): string[] {
  return values.filter((value) => value && text.includes(value));
}

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
