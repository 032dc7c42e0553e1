/**
 * A local trace backend for the tracing benchmark: takes what the OTLP/HTTP JSON exporter POSTs
 * to `/v1/traces`, answers 200 and keeps only counts (exports, spans, bytes), which `GET /stats`
 * returns. Its own process, pinned with the load generator, so receiving costs the server nothing.
 * Run: node dist/bench/otlp-sink.js --port 4318
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { parseArgs } from 'node:util';

/** Each exported span has exactly one `"spanId":` key (links and parents use other names). */
const SPAN_KEY = '"spanId":';

const stats = { exports: 0, spans: 0, bytes: 0 };

function countSpans(body: string): number {
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
    stats.spans += countSpans(body.toString('utf8'));
    response.writeHead(200, { 'content-type': 'application/json' });
    response.end('{}');
  });
});
server.listen(Number(values.port), '127.0.0.1', () => {
  process.stdout.write(`${(server.address() as AddressInfo).port}\n`);
});
