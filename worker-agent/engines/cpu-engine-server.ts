/**
 * The CPU engine behind a plain `node:http` OpenAI-compatible server, so the `openai`
 * adapter can be tested against a real socket and demos can run without a GPU:
 * `node dist/worker-agent/engines/cpu-engine-server.js --port 8000` (timing and switches from
 * the WORKER_CPU_* variables).
 */
import http from 'node:http';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { parseArgs } from 'node:util';
import { DEFAULT_CPU_ENGINE_OPTIONS, loadCpuEngineOptions, type CpuEngineOptions } from './cpu-engine-options';
import { planCpuCompletion, type CpuCompletionPlan } from './cpu-request';
import { cpuEventStream, cpuResponseBody } from './cpu-response';
import type { EmbeddingSpec } from '../../proto/worker/v1/index';
import { cpuEmbeddings } from './cpu-embeddings';
import { EngineFailure } from './engine-failure';
import { isObject, type EngineRoutePath } from './engine-request';
import { cpuPrefixSimulator, type CpuPrefixSimulator } from './cpu-prefix-cache';
import { parseJsonText } from '../../common/json-nesting';

export interface CpuEngineServerOptions {
  /** @default 0 (a free port) */
  readonly port?: number;
  /** @default 127.0.0.1 */
  readonly host?: string;
  readonly options?: Partial<CpuEngineOptions>;
  /** Sees every completion request body as the engine received it (tests assert on it). */
  readonly onRequest?: (path: string, body: Record<string, unknown>) => void;
  /** The vectors and input limit `/v1/embeddings` answers with, as a vLLM serving one embedding model would. @default 1024 dimensions, 512 tokens */
  readonly embedding?: EmbeddingSpec;
}

export interface CpuEngineServer {
  /** Base URL, e.g. `http://127.0.0.1:8000` (the OpenAI API lives under `/v1`). */
  readonly url: string;
  readonly port: number;
  /** Completion requests still being answered; drops at once when a client aborts. */
  activeRequests(): number;
  close(): Promise<void>;
}

const COMPLETION_PATHS: readonly string[] = ['/v1/chat/completions', '/v1/completions'];

export async function startCpuEngineServer(serverOptions: CpuEngineServerOptions = {}): Promise<CpuEngineServer> {
  const options: CpuEngineOptions = { ...DEFAULT_CPU_ENGINE_OPTIONS, ...serverOptions.options };
  // One simulated prefix cache and prefill lane per server, as one engine has (none by default).
  const prefix = cpuPrefixSimulator(options);
  let active = 0;
  const server = http.createServer((request, response) => {
    const path = (request.url ?? '/').split('?')[0];
    if (request.method === 'POST' && COMPLETION_PATHS.includes(path)) {
      active += 1;
      response.once('close', () => { active -= 1; });
      void answerCompletion(request, response, path as EngineRoutePath, options, serverOptions.onRequest, prefix);
    } else if (request.method === 'POST' && path === '/v1/embeddings') {
      void answerEmbeddings(request, response, serverOptions.embedding ?? DEFAULT_SERVER_EMBEDDING, serverOptions.onRequest);
    } else if (request.method === 'GET' && path === '/v1/models') {
      sendJson(response, 200, { object: 'list', data: [{ id: 'cpu', object: 'model', created: 0, owned_by: 'worker-agent' }] });
    } else if (request.method === 'GET' && path === '/health') {
      sendJson(response, 200, { status: 'ok' });
    } else {
      sendJson(response, 404, { error: { message: `no route ${request.method} ${path}`, type: 'invalid_request_error', param: null, code: 'not_found' } });
    }
  });
  server.listen(serverOptions.port ?? 0, serverOptions.host ?? '127.0.0.1');
  await once(server, 'listening');
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://${serverOptions.host ?? '127.0.0.1'}:${port}`,
    port,
    activeRequests: () => active,
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

async function answerCompletion(
  request: http.IncomingMessage, response: http.ServerResponse, path: EngineRoutePath,
  options: CpuEngineOptions, onRequest: CpuEngineServerOptions['onRequest'], prefix: CpuPrefixSimulator | undefined,
): Promise<void> {
  const abort = new AbortController();
  response.once('close', () => abort.abort());
  try {
    const payload = await readJsonObject(request);
    onRequest?.(path, payload);
    const plan = planCpuCompletion(payload, path, options);
    if (plan.stream) await streamCompletion(plan, response, abort.signal, prefix);
    else sendBytes(response, 200, await cpuResponseBody(plan, abort.signal, prefix));
  } catch (error) {
    if (abort.signal.aborted) return;
    if (response.headersSent) {
      // A broken chunked stream is what a crashing engine looks like to its client.
      response.destroy();
    } else if (error instanceof EngineFailure && error.engineBody && error.engineStatus) {
      sendBytes(response, error.engineStatus, error.engineBody);
    } else {
      sendJson(response, 500, { error: { message: (error as Error).message, type: 'server_error', param: null, code: null } });
    }
  }
}

const DEFAULT_SERVER_EMBEDDING: EmbeddingSpec = { dimensions: 1024, maxInputTokens: 512 };

/** Refusals are a 400 with an OpenAI error body, as vLLM answers an over-long input. */
async function answerEmbeddings(
  request: http.IncomingMessage, response: http.ServerResponse, spec: EmbeddingSpec, onRequest: CpuEngineServerOptions['onRequest'],
): Promise<void> {
  try {
    const payload = await readJsonObject(request);
    onRequest?.('/v1/embeddings', payload);
    sendBytes(response, 200, cpuEmbeddings(payload, spec, typeof payload.model === 'string' ? payload.model : 'cpu').body);
  } catch (error) {
    if (error instanceof EngineFailure && error.engineBody && error.engineStatus) {
      sendBytes(response, error.engineStatus, error.engineBody);
    } else if (error instanceof EngineFailure && error.code === 'invalid_job') {
      sendJson(response, 400, { error: { message: error.message, type: 'invalid_request_error', param: 'input', code: null } });
    } else {
      sendJson(response, 500, { error: { message: (error as Error).message, type: 'server_error', param: null, code: null } });
    }
  }
}

async function streamCompletion(plan: CpuCompletionPlan, response: http.ServerResponse, signal: AbortSignal, prefix: CpuPrefixSimulator | undefined): Promise<void> {
  response.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
  response.flushHeaders();
  for await (const bytes of cpuEventStream(plan, signal, prefix)) {
    if (!response.write(bytes)) await once(response, 'drain', { signal });
  }
  response.end();
}

async function readJsonObject(request: http.IncomingMessage): Promise<Record<string, unknown>> {
  const parts: Buffer[] = [];
  for await (const part of request) parts.push(part as Buffer);
  let parsed: unknown;
  try {
    parsed = parseJsonText(Buffer.concat(parts));
  } catch {
    parsed = undefined;
  }
  if (!isObject(parsed)) {
    const body = { error: { message: 'request body must be a JSON object', type: 'invalid_request_error', param: null, code: 'invalid_json' } };
    throw new EngineFailure('engine_rejected', body.error.message, { engineStatus: 400, engineBody: Buffer.from(JSON.stringify(body)) });
  }
  return parsed;
}

function sendJson(response: http.ServerResponse, status: number, body: unknown): void {
  sendBytes(response, status, Buffer.from(JSON.stringify(body)));
}

function sendBytes(response: http.ServerResponse, status: number, body: Buffer): void {
  response.writeHead(status, { 'content-type': 'application/json', 'content-length': body.length });
  response.end(body);
}

async function runFromCommandLine(): Promise<void> {
  const { values } = parseArgs({ options: { port: { type: 'string' }, host: { type: 'string' } } });
  const server = await startCpuEngineServer({
    port: values.port === undefined ? 8000 : Number(values.port),
    host: values.host ?? '127.0.0.1',
    options: loadCpuEngineOptions(process.env),
  });
  process.stdout.write(`cpu engine listening on ${server.url}\n`);
  const shutdown = () => void server.close().then(() => process.exit(0));
  process.once('SIGTERM', shutdown);
  process.once('SIGINT', shutdown);
}

if (require.main === module) {
  runFromCommandLine().catch((error: unknown) => {
    process.stderr.write(`${(error as Error).message}\n`);
    process.exit(2);
  });
}
