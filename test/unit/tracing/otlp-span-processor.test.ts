/**
 * Our batch span processor against a real OTLP/HTTP receiver on a local port (http and https):
 * batching, the schedule, the queue's bound, flush and shutdown, a receiver that fails or never
 * answers, one kept-alive connection for every export, and mutual TLS from the OTEL_* variables.
 */
import { readFileSync } from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { SamplingDecision, TracerProvider } from '@opentelemetry/sdk-trace';
import { readTracingSettings } from '../../../common/tracing/otel-settings';
import { OtlpHttpSender } from '../../../common/tracing/otlp-http-sender';
import { OtlpSpanProcessor, type OtlpBatchOptions } from '../../../common/tracing/otlp-span-processor';
import { SpanKind, Tracing } from '../../../common/tracing/tracing';
import { decodeMessage } from './otlp-message';

const fixture = (name: string) => path.join(__dirname, 'fixtures', name);
const CERT = readFileSync(fixture('localhost-cert.pem'), 'utf8');
const KEY = readFileSync(fixture('localhost-key.pem'), 'utf8');

/** A trace backend: answers each export per `answer` and counts connections, requests and the spans in each. */
class TraceReceiver {
  readonly batches: Array<{ spans: string[]; contentType: string; apiKey: string | undefined }> = [];
  connections = 0;
  readonly seenSockets = new WeakSet<object>();
  lastSocket: object | null = null;
  answer: 'ok' | 'fail' | 'never' | 'drop kept-alive' = 'ok';

  private constructor(private readonly server: http.Server, readonly url: string) {}

  /** `secure`: https; `mutual`: https that takes only clients with a certificate it trusts (its own, here). */
  static async start(secure: boolean | 'mutual' = false): Promise<TraceReceiver> {
    let receiver: TraceReceiver;
    const handler: http.RequestListener = (request, response) => {
      const parts: Buffer[] = [];
      request.on('data', (part: Buffer) => parts.push(part));
      request.on('end', () => {
        const decoded = decodeMessage(Buffer.concat(parts)) as any;
        const spans = decoded.resourceSpans.flatMap((resource: any) => resource.scopeSpans.flatMap((scope: any) => scope.spans.map((span: any) => span.name)));
        receiver.batches.push({ spans, contentType: String(request.headers['content-type']), apiKey: request.headers['x-api-key'] as string | undefined });
        if (receiver.answer === 'never') return;
        // As a receiver whose idle timeout closed the connection just as the next request came: a reused socket dies unanswered.
        if (receiver.answer === 'drop kept-alive' && request.socket !== receiver.lastSocket && receiver.seenSockets.has(request.socket)) {
          receiver.lastSocket = request.socket;
          request.socket.destroy();
          return;
        }
        receiver.seenSockets.add(request.socket);
        response.writeHead(receiver.answer === 'fail' ? 500 : 200, { 'content-type': 'application/x-protobuf' }).end();
      });
    };
    const server = secure
      ? https.createServer({ cert: CERT, key: KEY, ...(secure === 'mutual' ? { requestCert: true, rejectUnauthorized: true, ca: CERT } : {}) }, handler)
      : http.createServer(handler);
    server.on(secure ? 'secureConnection' : 'connection', () => receiver.connections++);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    receiver = new TraceReceiver(server, `${secure ? 'https' : 'http'}://127.0.0.1:${(server.address() as AddressInfo).port}/v1/traces`);
    return receiver;
  }

  spanCounts(): number[] {
    return this.batches.map((batch) => batch.spans.length);
  }

  async stop(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise((resolve) => this.server.close(resolve));
  }
}

const BATCH: OtlpBatchOptions = { scheduleDelayMs: 60_000, maxQueueSize: 100, maxExportBatchSize: 3 };

function tracedBy(receiver: TraceReceiver, batch: Partial<OtlpBatchOptions> = {}, timeoutMs = 5_000) {
  const sender = new OtlpHttpSender({ endpoint: receiver.url, headers: { 'x-api-key': 'k1' }, timeoutMs, tls: { ca: CERT } });
  const processor = new OtlpSpanProcessor(sender, { ...BATCH, ...batch });
  const provider = new TracerProvider({ spanProcessors: [processor] });
  const tracer = provider.getTracer('test');
  return { processor, provider, end: (...names: string[]) => names.forEach((name) => tracer.startSpan(name).end()) };
}

const until = async (check: () => boolean, what: string, timeoutMs = 5_000) => {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
};

describe('the OTLP span processor', () => {
  let receiver: TraceReceiver;
  beforeEach(async () => {
    receiver = await TraceReceiver.start();
  });
  afterEach(async () => {
    await receiver.stop();
  });

  test('sends a full batch at once and the rest on flush, in order, as protobuf with the headers, over one kept-alive connection', async () => {
    const { processor, provider, end } = tracedBy(receiver);
    end('s1', 's2', 's3', 's4', 's5', 's6', 's7');
    await until(() => receiver.batches.length === 2, 'two full batches');
    expect(receiver.spanCounts()).toEqual([3, 3]);
    await processor.forceFlush();
    expect(receiver.batches.map((batch) => batch.spans)).toEqual([['s1', 's2', 's3'], ['s4', 's5', 's6'], ['s7']]);
    expect(receiver.batches.every((batch) => batch.contentType === 'application/x-protobuf' && batch.apiKey === 'k1')).toBe(true);
    end('s8');
    await provider.shutdown();
    expect(receiver.spanCounts()).toEqual([3, 3, 1, 1]);
    expect(receiver.connections).toBe(1);
    expect(processor).toMatchObject({ exportedSpans: 8, failedSpans: 0, droppedSpans: 0 });
    // After shutdown, spans are dropped quietly.
    end('late');
    await processor.forceFlush();
    expect(receiver.batches).toHaveLength(4);
  });

  test('sends a batch that is not full after the schedule delay', async () => {
    const { provider, end } = tracedBy(receiver, { scheduleDelayMs: 50, maxExportBatchSize: 100 });
    end('a', 'b');
    expect(receiver.batches).toHaveLength(0);
    await until(() => receiver.batches.length === 1, 'the scheduled export');
    expect(receiver.spanCounts()).toEqual([2]);
    end('c');
    await until(() => receiver.batches.length === 2, 'the next scheduled export');
    await provider.shutdown();
  });

  test('exports only sampled spans', async () => {
    const sender = new OtlpHttpSender({ endpoint: receiver.url, headers: {}, timeoutMs: 5_000 });
    const processor = new OtlpSpanProcessor(sender, BATCH);
    // Recorded but not sampled: the SDK hands such spans to processors, and they must not leave the process.
    const recordOnly = { shouldSample: () => ({ decision: SamplingDecision.RECORD }), toString: () => 'record-only' };
    const provider = new TracerProvider({ sampler: recordOnly, spanProcessors: [processor] });
    provider.getTracer('test').startSpan('recorded only').end();
    await provider.shutdown();
    expect(receiver.batches).toHaveLength(0);
  });

  test('a receiver answering 500 loses that batch only: no retry, and the next batch goes through on the same connection', async () => {
    const { processor, provider, end } = tracedBy(receiver);
    receiver.answer = 'fail';
    end('lost1', 'lost2', 'lost3');
    await until(() => processor.failedSpans === 3, 'the failed export');
    receiver.answer = 'ok';
    end('kept');
    await processor.forceFlush();
    expect(receiver.batches.map((batch) => batch.spans)).toEqual([['lost1', 'lost2', 'lost3'], ['kept']]);
    expect(processor).toMatchObject({ exportedSpans: 1, failedSpans: 3 });
    expect(receiver.connections).toBe(1);
    await provider.shutdown();
  });

  test('a receiver that never answers: the export times out, the queue stays bounded (drops are counted) and shutdown returns', async () => {
    receiver.answer = 'never';
    const { processor, provider, end } = tracedBy(receiver, { maxQueueSize: 4, maxExportBatchSize: 2 }, 300);
    end('in flight 1', 'in flight 2');
    await until(() => receiver.batches.length === 1, 'the first export');
    const started = Date.now();
    // The first batch waits for its answer: four more fill the queue and the rest are dropped, without throwing.
    expect(() => end('q1', 'q2', 'q3', 'q4', 'd1', 'd2', 'd3')).not.toThrow();
    expect(processor.droppedSpans).toBe(3);
    await provider.shutdown();
    // Three requests of two, each given up after 300 ms, one at a time.
    expect(receiver.spanCounts()).toEqual([2, 2, 2]);
    expect(processor).toMatchObject({ exportedSpans: 0, failedSpans: 6, droppedSpans: 3 });
    expect(Date.now() - started).toBeLessThan(3_000);
  });

  test('a kept-alive connection dropped as the next export arrives: that export is sent once more, on a new connection', async () => {
    const { processor, provider, end } = tracedBy(receiver);
    end('a1', 'a2', 'a3');
    await processor.forceFlush();
    receiver.answer = 'drop kept-alive';
    end('b1');
    await processor.forceFlush();
    expect(receiver.batches.map((batch) => batch.spans)).toEqual([['a1', 'a2', 'a3'], ['b1'], ['b1']]);
    expect(processor).toMatchObject({ exportedSpans: 4, failedSpans: 0 });
    expect(receiver.connections).toBe(2);
    await provider.shutdown();
  });

  test('https: one TLS connection for every export', async () => {
    const secure = await TraceReceiver.start(true);
    try {
      const { processor, provider, end } = tracedBy(secure);
      end('t1', 't2', 't3', 't4');
      await processor.forceFlush();
      end('t5');
      await provider.shutdown();
      expect(secure.spanCounts()).toEqual([3, 1, 1]);
      expect(secure.connections).toBe(1);
    } finally {
      await secure.stop();
    }
  });

  test('mutual TLS from the OTEL_* certificate variables: the CA and client certificate they name; without them the receiver refuses', async () => {
    const mutual = await TraceReceiver.start('mutual');
    const traced = async (env: NodeJS.ProcessEnv) => {
      const settings = readTracingSettings({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: mutual.url, OTEL_EXPORTER_OTLP_TIMEOUT: '2000', ...env }, 'test')!;
      const tracing = Tracing.start(settings, 'test');
      tracing.startSpan('over mutual tls', SpanKind.INTERNAL, undefined).end();
      await tracing.shutdown();
    };
    try {
      await traced({ OTEL_EXPORTER_OTLP_CERTIFICATE: fixture('localhost-cert.pem') });
      expect(mutual.batches).toEqual([]);
      await traced({
        OTEL_EXPORTER_OTLP_CERTIFICATE: fixture('localhost-cert.pem'), OTEL_EXPORTER_OTLP_TRACES_CLIENT_CERTIFICATE: fixture('localhost-cert.pem'),
        OTEL_EXPORTER_OTLP_CLIENT_KEY: fixture('localhost-key.pem'),
      });
      expect(mutual.batches.map((batch) => batch.spans)).toEqual([['over mutual tls']]);
    } finally {
      await mutual.stop();
    }
  });
});
