import http from 'node:http';
import type net from 'node:net';
import zlib from 'node:zlib';
import { decodeTraceRequest } from './otlp-protobuf';

/** One span as an OTLP/HTTP export (protobuf or JSON) carried it, flattened with its process's service name. */
export interface ReceivedSpan {
  readonly service: string;
  readonly traceId: string;
  readonly spanId: string;
  /** '' for a root span. */
  readonly parentSpanId: string;
  readonly name: string;
  /** OTLP's SpanKind number: 1 internal, 2 server, 3 client. */
  readonly kind: number;
  readonly attributes: Record<string, unknown>;
  /** OTLP status code: 0 unset, 1 ok, 2 error. */
  readonly status: { code: number; message?: string };
  readonly links: Array<{ traceId: string; spanId: string }>;
  readonly startMs: number;
  readonly endMs: number;
}

export const SPAN_KIND = { internal: 1, server: 2, client: 3 } as const;

/**
 * A trace backend at the boundary we do not own: a plain node:http server that takes what the
 * OTLP/HTTP exporters POST to `/v1/traces`, protobuf (`application/x-protobuf`, the default) or
 * JSON (`application/json`), as a Collector, Jaeger or Tempo would, and keeps the spans. Point OTEL_EXPORTER_OTLP_ENDPOINT at `url`.
 */
export class OtlpReceiver {
  readonly spans: ReceivedSpan[] = [];
  /** Every export's path and content type, to check what the exporter sent. */
  readonly exports: Array<{ path: string; contentType: string }> = [];

  private constructor(private readonly server: http.Server, readonly url: string) {}

  static async start(): Promise<OtlpReceiver> {
    let receiver: OtlpReceiver;
    const server = http.createServer((request, response) => {
      const parts: Buffer[] = [];
      request.on('data', (part: Buffer) => parts.push(part));
      request.on('end', () => {
        let body = Buffer.concat(parts);
        if (request.headers['content-encoding'] === 'gzip') body = zlib.gunzipSync(body);
        receiver.exports.push({ path: request.url ?? '', contentType: String(request.headers['content-type'] ?? '') });
        if (request.url === '/v1/traces') {
          const protobuf = String(request.headers['content-type']).startsWith('application/x-protobuf');
          receiver.spans.push(...decode(protobuf ? decodeTraceRequest(body) : JSON.parse(body.toString('utf8'))));
        }
        response.writeHead(200, { 'content-type': 'application/json' });
        response.end('{}');
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as net.AddressInfo;
    receiver = new OtlpReceiver(server, `http://127.0.0.1:${port}`);
    return receiver;
  }

  /** The spans of one trace. */
  trace(traceId: string): ReceivedSpan[] {
    return this.spans.filter((span) => span.traceId === traceId);
  }

  /** Waits until `check` holds of the spans received so far (polling), then returns them. */
  async waitFor(check: (spans: ReceivedSpan[]) => boolean, timeoutMs: number, what: string): Promise<ReceivedSpan[]> {
    const deadline = Date.now() + timeoutMs;
    while (!check(this.spans)) {
      if (Date.now() > deadline) {
        throw new Error(`timed out waiting for ${what}; received: ${this.spans.map((span) => `${span.service}/${span.name}`).join(', ') || 'no spans'}`);
      }
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    return this.spans;
  }

  async stop(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise((resolve) => this.server.close(resolve));
  }
}

interface OtlpValue { stringValue?: string; intValue?: string | number; doubleValue?: number; boolValue?: boolean; arrayValue?: { values?: OtlpValue[] } }

function valueOf(value: OtlpValue): unknown {
  if (value.stringValue !== undefined) return value.stringValue;
  if (value.intValue !== undefined) return Number(value.intValue);
  if (value.doubleValue !== undefined) return value.doubleValue;
  if (value.boolValue !== undefined) return value.boolValue;
  if (value.arrayValue !== undefined) return (value.arrayValue.values ?? []).map(valueOf);
  return undefined;
}

function attributesOf(list: Array<{ key: string; value: OtlpValue }> | undefined): Record<string, unknown> {
  return Object.fromEntries((list ?? []).map((attribute) => [attribute.key, valueOf(attribute.value)]));
}

function decode(request: any): ReceivedSpan[] {
  const spans: ReceivedSpan[] = [];
  for (const resourceSpans of request.resourceSpans ?? []) {
    const service = String(attributesOf(resourceSpans.resource?.attributes)['service.name'] ?? '');
    for (const scopeSpans of resourceSpans.scopeSpans ?? []) {
      for (const span of scopeSpans.spans ?? []) {
        spans.push({
          service, traceId: span.traceId, spanId: span.spanId, parentSpanId: span.parentSpanId ?? '', name: span.name, kind: span.kind,
          attributes: attributesOf(span.attributes), status: span.status ?? { code: 0 },
          links: (span.links ?? []).map((link: { traceId: string; spanId: string }) => ({ traceId: link.traceId, spanId: link.spanId })),
          startMs: Number(BigInt(span.startTimeUnixNano) / 1_000_000n), endMs: Number(BigInt(span.endTimeUnixNano) / 1_000_000n),
        });
      }
    }
  }
  return spans;
}
