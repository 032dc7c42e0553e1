/**
 * The agent reports the prompt tokens an engine served from its prefix cache (Usage.cached_tokens),
 * read from what it parses anyway: OpenAI's `usage.prompt_tokens_details.cached_tokens` in a
 * whole answer (vLLM, SGLang) or in a stream's final usage chunk. The answer's `id` comes along
 * for the job's trace. The llama.cpp engine's own count is checked in test/llama/llama-prefix-cache.test.ts.
 */
import { wireUsage } from '../../proto/worker/v1/index';
import type { EngineSink } from '../../worker-agent/engines/engine';
import { forwardJsonBody, StreamForwarder } from '../../worker-agent/engines/engine-response';
import { SseEventFilter } from '../../worker-agent/engines/sse-event-filter';
import { usageFromOpenAi } from '../../worker-agent/engines/usage-estimate';

const SINK: EngineSink = { chunk: () => undefined, output: () => undefined };

describe('usageFromOpenAi', () => {
  test.each<[string, unknown, number | undefined]>([
    ['vLLM with prefix caching', { cached_tokens: 96 }, 96],
    ['a count the prompt cannot hold is capped at the prompt', { cached_tokens: 500 }, 128],
    ['no details (an engine without a prefix cache)', undefined, undefined],
    ['details of null', null, undefined],
    ['a cache that served nothing', { cached_tokens: 0 }, undefined],
    ['a count that is not a whole number', { cached_tokens: '96' }, undefined],
    ['a negative count', { cached_tokens: -3 }, undefined],
  ])('%s', (_name, details, cached) => {
    const usage = usageFromOpenAi({ prompt_tokens: 128, completion_tokens: 4, total_tokens: 132, ...(details === undefined ? {} : { prompt_tokens_details: details }) });
    expect(usage).toEqual({ promptTokens: 128, completionTokens: 4, totalTokens: 132, ...(cached === undefined ? {} : { cachedTokens: cached }) });
  });

  test('the wire form carries it, and 0 when the engine said nothing', () => {
    expect(wireUsage({ promptTokens: 128, completionTokens: 4, totalTokens: 132, cachedTokens: 96 })).toEqual({ promptTokens: 128, completionTokens: 4, totalTokens: 132, cachedTokens: 96 });
    expect(wireUsage({ promptTokens: 1, completionTokens: 1, totalTokens: 2 })).toEqual({ promptTokens: 1, completionTokens: 1, totalTokens: 2, cachedTokens: 0 });
  });
});

describe('a stream\'s final usage chunk', () => {
  // vLLM 0.9 (compact JSON) with --enable-prefix-caching and stream_options.include_usage.
  const VLLM = [
    'data: {"id":"chatcmpl-7f3","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"Hi"},"logprobs":null,"finish_reason":"stop"}],"usage":null}\n\n',
    'data: {"id":"chatcmpl-7f3","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":40,"total_tokens":41,"completion_tokens":1,"prompt_tokens_details":{"cached_tokens":32}}}\n\n',
    'data: [DONE]\n\n',
  ].join('');
  // SGLang (Python's json spacing), which reports the same field.
  const SGLANG = [
    'data: {"id": "a1b2", "object": "chat.completion.chunk", "created": 1, "model": "m", "choices": [{"index": 0, "delta": {"content": "Hi"}, "finish_reason": "stop"}], "usage": null}\n\n',
    'data: {"id": "a1b2", "object": "chat.completion.chunk", "created": 1, "model": "m", "choices": [], "usage": {"prompt_tokens": 40, "total_tokens": 41, "completion_tokens": 1, "prompt_tokens_details": {"cached_tokens": 16}}}\n\n',
    'data: [DONE]\n\n',
  ].join('');

  test.each([['vLLM', VLLM, 32, 'chatcmpl-7f3'], ['SGLang', SGLANG, 16, 'a1b2']])('%s: cached tokens and the answer id, whatever the read size', (_engine, stream, cached, id) => {
    for (const pieceLength of [1, 13, 4_096]) {
      const filter = new SseEventFilter(false);
      const bytes = Buffer.from(stream);
      for (let offset = 0; offset < bytes.length; offset += pieceLength) filter.push(bytes.subarray(offset, offset + pieceLength));
      filter.end();
      expect(filter.usage).toEqual({ promptTokens: 40, completionTokens: 1, totalTokens: 41, cachedTokens: cached });
      expect(filter.responseId).toBe(id);
    }
  });

  test('the forwarder\'s result carries them', async () => {
    const forwarder = new StreamForwarder(SINK, false, () => 'prompt');
    await forwarder.push(Buffer.from(VLLM));
    expect(await forwarder.finish()).toEqual({
      usage: { promptTokens: 40, completionTokens: 1, totalTokens: 41, cachedTokens: 32 }, finishReason: 'stop', usageEstimated: false, responseId: 'chatcmpl-7f3',
    });
  });
});

describe('a whole answer', () => {
  test('vLLM\'s chat.completion: cached tokens and its id', async () => {
    const body = Buffer.from(JSON.stringify({
      id: 'chatcmpl-9a', object: 'chat.completion', created: 1, model: 'm',
      choices: [{ index: 0, message: { role: 'assistant', content: 'Hi' }, finish_reason: 'stop' }],
      usage: { prompt_tokens: 40, completion_tokens: 1, total_tokens: 41, prompt_tokens_details: { cached_tokens: 24 } },
    }));
    expect(await forwardJsonBody(body, SINK, () => 'prompt')).toEqual({
      usage: { promptTokens: 40, completionTokens: 1, totalTokens: 41, cachedTokens: 24 }, finishReason: 'stop', usageEstimated: false, responseId: 'chatcmpl-9a',
    });
  });

  test('an engine that reports no usage: estimated, no cached tokens', async () => {
    const body = Buffer.from(JSON.stringify({ id: 'x', choices: [{ index: 0, message: { content: 'four char words' }, finish_reason: 'stop' }] }));
    const result = await forwardJsonBody(body, SINK, () => 'a prompt of some length');
    expect(result.usageEstimated).toBe(true);
    expect(result.usage.cachedTokens).toBeUndefined();
  });
});
