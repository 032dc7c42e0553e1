/**
 * An OpenAI-compatible engine over real HTTP that keeps each request's raw body bytes and
 * echoes the prompt back: in the answer's text, and, for a prompt containing `#reject`, in a
 * 400 error body (as vLLM quotes the offending input); `#slow` streams a chunk every 50 ms
 * until the client goes away. So a test can check both what the engine
 * received, byte for byte, and that the prompt never travels from an answer into a log.
 */
import http from 'node:http';
import type net from 'node:net';

export interface EchoEngineRequest {
  readonly path: string;
  readonly raw: Buffer;
  readonly body: Record<string, unknown>;
}

export interface EchoEngine {
  readonly url: string;
  readonly requests: EchoEngineRequest[];
  close(): Promise<void>;
}

/** `ownedBy`: what GET /v1/models answers as its model's `owned_by` (`llamacpp` for a llama.cpp server). */
export async function startEchoEngine(ownedBy = 'test'): Promise<EchoEngine> {
  const requests: EchoEngineRequest[] = [];
  const server = http.createServer((request, response) => {
    const parts: Buffer[] = [];
    request.on('data', (part: Buffer) => parts.push(part));
    request.on('end', () => {
      if (request.method === 'GET') return sendJson(response, 200, { object: 'list', data: [{ id: 'echo', object: 'model', created: 1, owned_by: ownedBy }] });
      const raw = Buffer.concat(parts);
      const body = JSON.parse(raw.toString('utf8')) as Record<string, unknown>;
      requests.push({ path: request.url ?? '', raw, body });
      const prompt = String((body.messages as Array<{ content?: unknown }> | undefined)?.[0]?.content ?? body.prompt ?? '');
      if (prompt.includes('#reject')) {
        return sendJson(response, 400, { error: { message: `cannot tokenize the prompt: ${prompt}`, type: 'BadRequestError', param: 'messages', code: 400 } });
      }
      const usage = { prompt_tokens: 3, completion_tokens: 2, total_tokens: 5 };
      if (body.stream !== true) {
        return sendJson(response, 200, {
          id: 'chatcmpl-echo', object: 'chat.completion', created: 1, model: body.model,
          choices: [{ index: 0, message: { role: 'assistant', content: `you said: ${prompt}` }, finish_reason: 'stop' }], usage,
        });
      }
      const event = (value: unknown) => `data: ${JSON.stringify(value)}\n\n`;
      const head = { id: 'chatcmpl-echo', object: 'chat.completion.chunk', created: 1, model: body.model };
      response.writeHead(200, { 'content-type': 'text/event-stream' });
      response.write(event({ ...head, choices: [{ index: 0, delta: { content: `you said: ${prompt}` }, finish_reason: null }] }));
      if (prompt.includes('#slow')) {
        const timer = setInterval(() => response.write(event({ ...head, choices: [{ index: 0, delta: { content: prompt }, finish_reason: null }] })), 50);
        response.on('close', () => clearInterval(timer));
        return;
      }
      response.write(event({ ...head, choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] }));
      response.write(event({ ...head, choices: [], usage }));
      response.end('data: [DONE]\n\n');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    close: () => new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    }),
  };
}

function sendJson(response: http.ServerResponse, status: number, value: unknown): void {
  const bytes = Buffer.from(JSON.stringify(value));
  response.writeHead(status, { 'content-type': 'application/json', 'content-length': bytes.length });
  response.end(bytes);
}
