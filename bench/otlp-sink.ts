/**
 * A local trace backend for the tracing benchmark: takes what the OTLP/HTTP exporters POST to
 * `/v1/traces` (protobuf, the default, or JSON), answers 200 and keeps only counts (exports,
 * spans, bytes), which `GET /stats` returns. Its own process, pinned with the load generator, so receiving costs the server nothing.
 * Run: node dist/bench/otlp-sink.js --port 4318
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { parseArgs } from 'node:util';

/** Each exported span has exactly one `"spanId":` key (links and parents use other names). */
const SPAN_KEY = '"spanId":';

const stats = { exports: 0, spans: 0, bytes: 0 };

/**
 * Spans in a protobuf ExportTraceServiceRequest: field 1 (ResourceSpans) → field 2 (ScopeSpans)
 * → each field 2 is one Span. Only lengths are read; every other field is skipped.
 */
function countProtobufSpans(body: Buffer, depth = 0, start = 0, end = body.length): number {
  let count = 0;
  let at = start;
  const varint = () => {
    let value = 0;
    for (let shift = 0; ; shift += 7) {
      const byte = body[at++];
      value += (byte & 0x7f) * 2 ** shift;
      if (byte < 0x80) return value;
    }
  };
  while (at < end) {
    const key = varint();
    const wire = key & 7;
    if (wire === 0) varint();
    else if (wire === 1) at += 8;
    else if (wire === 5) at += 4;
    else if (wire === 2) {
      const length = varint();
      const field = key >>> 3;
      if (depth === 0 && field === 1) count += countProtobufSpans(body, 1, at, at + length);
      else if (depth === 1 && field === 2) count += countProtobufSpans(body, 2, at, at + length);
      else if (depth === 2 && field === 2) count++;
      at += length;
    } else throw new Error(`unexpected protobuf wire type ${wire}`);
  }
  return count;
}

function countJsonSpans(body: string): number {
  let count = 0;
  for (let at = body.indexOf(SPAN_KEY); at !== -1; at = body.indexOf(SPAN_KEY, at + SPAN_KEY.length)) count++;
  return count;
}

const { values } = parseArgs({ options: { port: { type: 'string', default: '0' } } });
const server = http.createServer({ keepAliveTimeout: 120_000 }, (request, response) => {
  const parts: Buffer[] = [];
  request.on('data', (part: Buffer) => parts.push(part));
  request.on('end', () => {
    if (request.method === 'GET' && request.url === '/stats') {
      response.writeHead(200, { 'content-type': 'application/json' });
      response.end(JSON.stringify(stats));
      return;
    }
    const body = Buffer.concat(parts);
    stats.exports++;
    stats.bytes += body.length;
    stats.spans += String(request.headers['content-type']).startsWith('application/x-protobuf') ? countProtobufSpans(body) : countJsonSpans(body.toString('utf8'));
    response.writeHead(200, { 'content-type': 'application/json' });
    response.end('{}');
  });
});
server.listen(Number(values.port), '127.0.0.1', () => {
  process.stdout.write(`${(server.address() as AddressInfo).port}\n`);
});
