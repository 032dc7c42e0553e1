/**
 * The Node floor for `npm run bench` (issue 24): a bare Koa 3 + undici pass-through proxy, one
 * hop, no auth, no limits, no metering, no parsing: the request body read whole and forwarded,
 * a JSON answer read whole and sent with its length, an SSE answer streamed back untouched.
 * Our whole path is measured against it in the same run, on the same core.
 * Usage: node dist/bench/koa-proxy.js --port N --upstream http://127.0.0.1:M
 */
import { parseArgs } from 'node:util';
import Koa from 'koa';
import { Pool } from 'undici';

const { values } = parseArgs({ options: { port: { type: 'string' }, upstream: { type: 'string' } } });
if (!values.port || !values.upstream) throw new Error('--port and --upstream are required');
const pool = new Pool(values.upstream, { connections: 256, pipelining: 1 });
const app = new Koa();
app.use(async (context) => {
  // The request body is small (a chat request): read whole, sent as one buffer.
  const chunks: Buffer[] = [];
  for await (const chunk of context.req) chunks.push(chunk as Buffer);
  const upstream = await pool.request({
    method: context.method as 'POST', path: context.url, body: Buffer.concat(chunks),
    headers: { 'content-type': context.get('content-type') || 'application/json' },
  });
  context.status = upstream.statusCode;
  const type = upstream.headers['content-type'];
  if (typeof type === 'string') context.type = type;
  if (typeof type === 'string' && type.startsWith('text/event-stream')) {
    // Koa destroys the body when the client goes away; undici then emits an abort error that
    // nobody else listens to (an unhandled 'error' would kill the process mid-benchmark).
    upstream.body.on('error', () => {});
    context.body = upstream.body;
    return;
  }
  // Streamed, a small answer left as two writes (headers, then body): read whole, it is one.
  context.body = Buffer.from(await upstream.body.arrayBuffer());
});
app.listen(Number(values.port), '127.0.0.1');
