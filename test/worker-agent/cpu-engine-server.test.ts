import OpenAI from 'openai';
import { request } from 'undici';
import { startCpuEngineServer, type CpuEngineServer } from '../../worker-agent/engines/cpu-engine-server';
import { countTokens } from '../../worker-agent/engines/cpu-tokenizer';
import { sseEvents, streamedText } from './support/engine-harness';

let server: CpuEngineServer;
beforeAll(async () => { server = await startCpuEngineServer(); });
afterAll(async () => { await server.close(); });

async function post(path: string, body: unknown) {
  const response = await request(`${server.url}${path}`, { method: 'POST', body: typeof body === 'string' ? body : JSON.stringify(body), headers: { 'content-type': 'application/json' } });
  return { status: response.statusCode, headers: response.headers, text: await response.body.text() };
}

describe('CPU engine HTTP server', () => {
  test('streams OpenAI chunks, the usage chunk, then [DONE]', async () => {
    const response = await post('/v1/chat/completions', {
      model: 'demo', messages: [{ role: 'user', content: 'hi' }], stream: true, stream_options: { include_usage: true }, max_tokens: 4, n: 2,
    });
    expect(response.status).toBe(200);
    expect(response.headers['content-type']).toBe('text/event-stream');
    const events = sseEvents(response.text);
    expect(events.at(-1)).toBe('[DONE]');
    const chunks = events.slice(0, -1) as Array<Record<string, any>>;
    expect(chunks.at(-1)).toMatchObject({ object: 'chat.completion.chunk', model: 'demo', choices: [], usage: { prompt_tokens: 1, completion_tokens: 8, total_tokens: 9 } });
    expect(chunks.slice(0, -1).every((chunk) => chunk.usage === null)).toBe(true);
    expect(countTokens(streamedText(events, 0))).toBe(4);
    expect(countTokens(streamedText(events, 1))).toBe(4);
    const finishes = chunks.flatMap((chunk) => chunk.choices).filter((choice: any) => choice.finish_reason);
    expect(finishes.map((choice: any) => [choice.index, choice.finish_reason])).toEqual([[0, 'length'], [1, 'length']]);
  });

  test('answers non-JSON bodies and unknown routes with OpenAI error bodies', async () => {
    const invalid = await post('/v1/chat/completions', '{oops');
    expect(invalid.status).toBe(400);
    expect(JSON.parse(invalid.text).error).toMatchObject({ type: 'invalid_request_error', code: 'invalid_json' });
    const missing = await post('/v1/audio/speech', {});
    expect(missing.status).toBe(404);
  });

  test('serves /health and /v1/models', async () => {
    expect((await request(`${server.url}/health`)).statusCode).toBe(200);
    const models = await (await request(`${server.url}/v1/models`)).body.json() as { data: Array<{ id: string }> };
    expect(models.data.map((model) => model.id)).toEqual(['cpu']);
  });
});

describe('CPU engine HTTP server with the official OpenAI SDK', () => {
  test('non-streamed and streamed chat completions parse', async () => {
    const client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'unused', maxRetries: 0 });
    const completion = await client.chat.completions.create({ model: 'demo', messages: [{ role: 'user', content: 'hello there' }], max_tokens: 3, seed: 5 });
    expect(completion.usage).toEqual({ prompt_tokens: 2, completion_tokens: 3, total_tokens: 5 });
    const stream = await client.chat.completions.create({ model: 'demo', messages: [{ role: 'user', content: 'hello there' }], max_tokens: 3, seed: 5, stream: true });
    let text = '';
    for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? '';
    expect(text).toBe(completion.choices[0].message.content);
  });
});
