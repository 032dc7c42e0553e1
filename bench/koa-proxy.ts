/**
 * The Node floor for `npm run bench` (issue 24): a bare Koa 3 + undici pass-through proxy, one
 * hop, no auth, no limits, no metering, no parsing. Bodies stream both ways untouched, SSE
 * included. Our whole path is measured against it in the same run, on the same core.
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
  const upstream = await pool.request({
    method: context.method as 'POST', path: context.url, body: context.req,
    headers: { 'content-type': context.get('content-type') || 'application/json', ...(context.get('content-length') ? { 'content-length': context.get('content-length') } : {}) },
  });
  context.status = upstream.statusCode;
  const type = upstream.headers['content-type'];
  if (typeof type === 'string') context.type = type;
  context.body = upstream.body;
});
app.listen(Number(values.port), '127.0.0.1');
