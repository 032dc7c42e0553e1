import fs from 'node:fs';
import http from 'node:http';
import type net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import Koa from 'koa';
import pino, { type Logger } from 'pino';
import { Metrics } from '../../control-plane/telemetry/metrics';
import { errorMiddleware } from '../../gateway/errors/error-middleware';
import { RequestIds } from '../../gateway/http/request-id';
import { RequestLog } from '../../gateway/http/request-log';
import { requestTelemetry } from '../../gateway/http/request-telemetry';
import { startWithDeployment, waitFor, type ServerWithDeployment } from '../support/test-server';
import { chatOnce, postChat, userChat } from '../support/chat';
import { ROUTE_LABELS, routeLabel } from '../../gateway/route-label';
import { startServer, type Server } from '../../gateway/server';
import { createTestDatabase, dropTestDatabase } from '../support/test-database';
import { parsePrometheusText, sampleValue } from './support/prometheus-text';

/** A pino logger whose JSON lines land in `lines`. */
function capturingLogger(level: string): { logger: Logger; lines: Array<Record<string, unknown>> } {
  const lines: Array<Record<string, unknown>> = [];
  const destination = new Writable({
    write(chunk, _encoding, callback) {
      for (const line of String(chunk).split('\n')) if (line) lines.push(JSON.parse(line));
      callback();
    },
  });
  return { logger: pino({ level }, destination), lines };
}

describe('request ids in the server logs', () => {
  let server: Server;
  let databaseUrl: string;
  let dataDir: string;
  let lines: Array<Record<string, unknown>>;

  beforeAll(async () => {
    databaseUrl = await createTestDatabase();
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'inference-test-data-'));
    const captured = capturingLogger('info');
    lines = captured.lines;
    server = await startServer({
      env: {},
      logger: captured.logger,
      controlPlane: { databaseUrl, dataDir, grpcHost: '127.0.0.1', grpcPort: 0, localAgents: false, usageFlushIntervalMs: 20 },
      gateway: { host: '127.0.0.1', port: 0 },
    });
  });

  afterAll(async () => {
    await server?.stop();
    await dropTestDatabase(databaseUrl);
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  it('logs each request with its id at info level, on the fast lane and on Koa routes', async () => {
    const fastLane = await fetch(`${server.gateway.url}/d/some-deployment/v1/chat/completions`, {
      method: 'POST', headers: { authorization: 'Bearer sk-not-a-key', 'x-request-id': 'log-trace-fast' }, body: '{}',
    });
    expect(fastLane.status).toBe(401);
    const koa = await fetch(`${server.gateway.url}/healthz`);
    const koaId = koa.headers.get('x-request-id');

    expect(lines).toContainEqual(expect.objectContaining({
      msg: 'request', requestId: 'log-trace-fast', route: 'chat.completions', deployment: 'none', status: 401,
    }));
    expect(lines).toContainEqual(expect.objectContaining({ msg: 'request', requestId: koaId, route: 'healthz', status: 200 }));
  });
});

describe('request ids in the error middleware', () => {
  let server: http.Server;
  let url: string;
  let lines: Array<Record<string, unknown>>;
  let metrics: Metrics;

  beforeAll(async () => {
    const captured = capturingLogger('info');
    lines = captured.lines;
    metrics = new Metrics({ routes: ROUTE_LABELS });
    const app = new Koa();
    app.silent = true;
    // LOG_REQUESTS=false: no line per request, only the errors.
    app.use(requestTelemetry(metrics, new RequestIds(), new RequestLog(captured.logger, false), routeLabel));
    app.use(errorMiddleware(captured.logger));
    app.use(async () => {
      throw new Error('a bug, not an AppError');
    });
    server = http.createServer(app.callback());
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`;
  });

  afterAll(async () => {
    metrics.close();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });

  it('puts the request id on the unhandled-error log line and on the 500, and counts it', async () => {
    const given = await fetch(`${url}/anything`, { headers: { 'x-request-id': 'bug-trace-7' } });
    expect(given.status).toBe(500);
    expect(given.headers.get('x-request-id')).toBe('bug-trace-7');
    const generated = await fetch(`${url}/anything`);
    const generatedId = generated.headers.get('x-request-id');
    expect(generatedId).toMatch(/^req_/);

    const errors = lines.filter((line) => line.msg === 'unhandled error');
    expect(errors.map((line) => line.requestId)).toEqual(['bug-trace-7', generatedId]);
    expect(errors[0]).toMatchObject({ level: 50, path: '/anything', err: expect.objectContaining({ message: 'a bug, not an AppError' }) });
    // With request lines off, nothing but the errors is logged per request.
    expect(lines.filter((line) => line.msg === 'request')).toHaveLength(0);

    const samples = parsePrometheusText((await metrics.render()).body);
    expect(sampleValue(samples, 'inference_requests_total', { deployment: 'none', route: 'other', status: '500' })).toBe(2);
  });
});

describe('a request\'s line carries its tokens and timings', () => {
  let served: ServerWithDeployment;
  let lines: Array<Record<string, unknown>>;

  beforeAll(async () => {
    const captured = capturingLogger('info');
    lines = captured.lines;
    served = await startWithDeployment({ logger: captured.logger });
  });

  afterAll(async () => {
    await served?.test.stop();
  });

  it('a chat\'s line has its id, deployment, status, tokens and duration; a stream\'s its time to first byte', async () => {
    const { deployment, workspace } = served;
    await chatOnce(deployment.baseUrl, workspace.apiKey, userChat('hello', { max_tokens: 5 }), { headers: { 'x-request-id': 'tokens-plain' } });
    const streamed = await postChat(deployment.baseUrl, workspace.apiKey, userChat('hello', { max_tokens: 5, stream: true }), { headers: { 'x-request-id': 'tokens-stream' } });
    await streamed.text();
    await waitFor(() => lines.some((line) => line.requestId === 'tokens-stream'), 5_000, 'the stream\'s line');
    const plain = lines.find((line) => line.requestId === 'tokens-plain');
    expect(plain).toMatchObject({ level: 30, msg: 'request', route: 'chat.completions', deployment: deployment.id, status: 200 });
    expect(plain!.promptTokens).toBeGreaterThan(0);
    expect(plain!.completionTokens).toBeGreaterThan(0);
    expect(plain!.durationMs).toBeGreaterThan(0);
    const stream = lines.find((line) => line.requestId === 'tokens-stream');
    expect(stream).toMatchObject({ status: 200, deployment: deployment.id });
    expect(stream!.completionTokens).toBeGreaterThan(0);
    expect(stream!.ttftMs).toBeGreaterThan(0);
  });
});
