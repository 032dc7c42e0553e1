/**
 * The benchmark's engine: a minimal OpenAI-compatible server on plain node:http with no
 * artificial delay. A fixed ~600-byte `chat.completion`, or for `stream: true` N chunks
 * (20, or the request's `bench_chunks`, which our gateway passes through like any unknown
 * field) then a usage chunk when `stream_options.include_usage` is set (as vLLM does) and [DONE].
 * Run: node dist/bench/upstream.js --port 9000
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';

const BODY = Buffer.from(JSON.stringify({
  id: 'chatcmpl-bench0000000000000000', object: 'chat.completion', created: 1_700_000_000, model: 'bench-model',
  choices: [{ index: 0, message: { role: 'assistant', content: 'Hello! I am a helpful assistant. How can I help you today? Let me know what you need and I will do my best to help.' }, logprobs: null, finish_reason: 'stop' }],
  usage: { prompt_tokens: 12, completion_tokens: 30, total_tokens: 42 }, system_fingerprint: 'fp_bench_00001',
}).padEnd(600, ' '));
const chunk = (index: number) => Buffer.from(`data: {"id":"chatcmpl-bench","object":"chat.completion.chunk","created":1700000000,"model":"bench-model","choices":[{"index":0,"delta":{"content":"tok${index} "},"finish_reason":null}]}\n\n`);
const CHUNKS = Array.from({ length: 1_000 }, (_, index) => chunk(index));
const LAST = Buffer.from('data: {"id":"chatcmpl-bench","object":"chat.completion.chunk","created":1700000000,"model":"bench-model","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n');
const USAGE = Buffer.from('data: {"id":"chatcmpl-bench","object":"chat.completion.chunk","created":1700000000,"model":"bench-model","choices":[],"usage":{"prompt_tokens":12,"completion_tokens":20,"total_tokens":32}}\n\n');
const DONE = Buffer.from('data: [DONE]\n\n');
/** A 1×1 PNG: image jobs measure the platform's queue and upload path, not rendering. */
const PIXEL = '89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c4890000000d4944415478da63f8ffff3f0005fe02fea7d6a4e00000000049454e44ae426082';
const imagesBody = (count: number) => Buffer.from(JSON.stringify({ created: 1_700_000_000, data: Array.from({ length: count }, () => ({ b64_json: Buffer.from(PIXEL, 'hex').toString('base64') })) }));

export function startUpstream(port = 0, host = '127.0.0.1'): Promise<{ url: string; server: http.Server }> {
  const server = http.createServer({ keepAliveTimeout: 120_000 }, (request, response) => {
    const parts: Buffer[] = [];
    request.on('data', (part: Buffer) => parts.push(part));
    request.on('end', () => {
      if (request.method !== 'POST') {
        response.writeHead(200, { 'content-type': 'application/json' });
        response.end('{"object":"list","data":[{"id":"bench-model","object":"model","created":0,"owned_by":"bench"}]}');
        return;
      }
      const body = parts.length ? JSON.parse(Buffer.concat(parts).toString('utf8')) : {};
      if (request.url?.startsWith('/v1/images/')) {
        const images = imagesBody(Number(body.n) || 1);
        response.writeHead(200, { 'content-type': 'application/json', 'content-length': images.length });
        response.end(images);
        return;
      }
      if (!body.stream) {
        response.writeHead(200, { 'content-type': 'application/json', 'content-length': BODY.length });
        response.end(BODY);
        return;
      }
      response.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
      const count = Math.min(CHUNKS.length, Number(body.bench_chunks) || 20);
      for (let index = 0; index < count - 1; index++) response.write(CHUNKS[index]);
      response.write(LAST);
      if (body.stream_options?.include_usage) response.write(USAGE);
      response.end(DONE);
    });
  });
  return new Promise((resolve) => server.listen(port, host, () => {
    resolve({ url: `http://${host}:${(server.address() as AddressInfo).port}`, server });
  }));
}

if (require.main === module) {
  const portFlag = process.argv.indexOf('--port');
  void startUpstream(portFlag > 0 ? Number(process.argv[portFlag + 1]) : 9000).then(({ url }) => console.log(`upstream listening on ${url}`));
}
