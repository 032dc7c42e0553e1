import http from 'node:http';
import type net from 'node:net';

export interface MockEngineRequest {
  path: string;
  body: Record<string, unknown>;
  /** The request's headers as the agent sent them (a traced job's carry `traceparent`). */
  headers: http.IncomingHttpHeaders;
  /** Resolves when the engine saw the connection close before it finished answering. */
  closedEarly: Promise<void>;
}

/**
 * A scripted OpenAI-compatible engine at the boundary we don't own. The first message's
 * content (or the completion prompt) picks the behaviour: `#reject` → 400 with an OpenAI error
 * body, `#crash` → 500, `#slow` → one chunk every 50 ms for 30 s (to observe cancellation),
 * `#choices` → a completions answer with the four choices of two prompts × n = 2, as a body or
 * interleaved chunks; otherwise a short stream (`#cached`: its usage says 2 of its 3 prompt
 * tokens came from the prefix cache, as vLLM's `prompt_tokens_details.cached_tokens` does).
 */
export async function startMockEngine(): Promise<{ url: string; requests: MockEngineRequest[]; close(): Promise<void> }> {
  const requests: MockEngineRequest[] = [];
  const server = http.createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk) => chunks.push(chunk));
    request.on('end', () => {
      if (request.method === 'GET' && request.url === '/v1/models') {
        response.writeHead(200, { 'content-type': 'application/json' });
        response.end(JSON.stringify({ object: 'list', data: [{ id: 'mock-model', object: 'model', created: 1, owned_by: 'mock' }] }));
        return;
      }
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8') || '{}');
      let finished = false;
      let resolveClosed: () => void = () => {};
      const closedEarly = new Promise<void>((resolve) => (resolveClosed = resolve));
      response.on('close', () => !finished && resolveClosed());
      requests.push({ path: request.url ?? '', body, headers: request.headers, closedEarly });
      const content = String((body.messages as Array<{ content: string }> | undefined)?.[0]?.content ?? body.prompt ?? '');
      if (content.includes('#reject')) {
        finished = true;
        response.writeHead(400, { 'content-type': 'application/json' });
        response.end(JSON.stringify({ error: { message: 'This model\'s maximum context length is 8 tokens', type: 'BadRequestError', param: 'messages', code: 'context_length_exceeded' } }));
        return;
      }
      if (content.includes('#crash')) {
        finished = true;
        response.writeHead(500, { 'content-type': 'application/json' });
        response.end(JSON.stringify({ error: { message: 'CUDA out of memory', type: 'InternalServerError', code: 500 } }));
        return;
      }
      if (content.includes('#choices')) {
        finished = true;
        sendChoices(response, body.stream === true);
        return;
      }
      const chunk = (text: string) => `data: ${JSON.stringify({ id: 'chatcmpl-mock', object: 'chat.completion.chunk', created: 1, model: body.model, choices: [{ index: 0, delta: { content: text }, finish_reason: null }] })}\n\n`;
      response.writeHead(200, { 'content-type': 'text/event-stream' });
      if (!content.includes('#slow')) {
        response.write(chunk('mock '));
        response.write(chunk('reply'));
        const cached = content.includes('#cached') ? { prompt_tokens_details: { cached_tokens: 2 } } : {};
        response.write(`data: ${JSON.stringify({ id: 'chatcmpl-mock', object: 'chat.completion.chunk', created: 1, model: body.model, choices: [], usage: { prompt_tokens: 3, completion_tokens: 2, total_tokens: 5, ...cached } })}\n\n`);
        finished = true;
        response.end('data: [DONE]\n\n');
        return;
      }
      let sent = 0;
      const timer = setInterval(() => {
        if (sent++ > 600) {
          clearInterval(timer);
          finished = true;
          response.end('data: [DONE]\n\n');
          return;
        }
        response.write(chunk(`t${sent} `));
      }, 50);
      response.on('close', () => clearInterval(timer));
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

/** What `#choices` answers: choice i's text is `choice i`, 3 prompt and 2 completion tokens each. */
export const MOCK_CHOICES_USAGE = { prompt_tokens: 6, completion_tokens: 8, total_tokens: 14 };

function sendChoices(response: http.ServerResponse, stream: boolean): void {
  const head = { id: 'cmpl-mock', object: 'text_completion', created: 1, model: 'mock-model' };
  const indexes = [0, 1, 2, 3];
  if (!stream) {
    response.writeHead(200, { 'content-type': 'application/json' });
    const choices = indexes.map((index) => ({ index, text: `choice ${index}`, logprobs: null, finish_reason: 'length' }));
    response.end(JSON.stringify({ ...head, choices, usage: MOCK_CHOICES_USAGE }));
    return;
  }
  const event = (value: unknown) => `data: ${JSON.stringify(value)}\n\n`;
  const piece = (index: number, text: string, finishReason: string | null) => event({ ...head, choices: [{ index, text, logprobs: null, finish_reason: finishReason }] });
  response.writeHead(200, { 'content-type': 'text/event-stream' });
  // Choices interleave, as a batching engine sends them.
  response.write(indexes.map((index) => piece(index, 'choice', null)).join(''));
  response.write(indexes.map((index) => piece(index, ` ${index}`, 'length')).join(''));
  response.write(event({ ...head, choices: [], usage: MOCK_CHOICES_USAGE }));
  response.end('data: [DONE]\n\n');
}
