import { SseEventFilter } from '../../worker-agent/engines/sse-event-filter';
import { EngineFailure } from '../../worker-agent/engines/engine-failure';
import { modelRename, type ModelRename } from '../../worker-agent/engines/model-rename';

// Recorded from vLLM 0.6 (compact JSON) with stream_options.include_usage.
const VLLM_STREAM = [
  'data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}],"usage":null}\n\n',
  'data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"Hi"},"logprobs":null,"finish_reason":null}],"usage":null}\n\n',
  'data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"!"},"logprobs":null,"finish_reason":"stop","stop_reason":null}],"usage":null}\n\n',
  'data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":9,"total_tokens":11,"completion_tokens":2}}\n\n',
  'data: [DONE]\n\n',
].join('');

function filterInPieces(text: string, pieceLength: number, includeUsage: boolean, rename?: ModelRename) {
  const filter = new SseEventFilter(includeUsage, rename);
  const bytes = Buffer.from(text);
  const out: Buffer[] = [];
  for (let offset = 0; offset < bytes.length; offset += pieceLength) {
    const events = filter.push(bytes.subarray(offset, offset + pieceLength));
    if (events) out.push(events);
  }
  const tail = filter.end();
  if (tail) out.push(tail);
  return { filter, text: Buffer.concat(out).toString('utf8') };
}

describe('SseEventFilter', () => {
  test.each([1, 7, 64, 100_000])('passes whole events through whatever the read size (%i bytes)', (pieceLength) => {
    const { filter, text } = filterInPieces(VLLM_STREAM, pieceLength, false);
    const events = VLLM_STREAM.split('\n\n').map((event) => `${event}\n\n`);
    expect(text).toBe(events.slice(0, 3).join(''));
    expect(filter.usage).toEqual({ promptTokens: 9, completionTokens: 2, totalTokens: 11 });
    expect(filter.finishReason).toBe('stop');
    expect(filter.contentEvents).toBe(2);
    expect(filter.sawDone).toBe(true);
  });

  test('keeps the usage chunk when the client asked for it, but never [DONE]', () => {
    const { text } = filterInPieces(VLLM_STREAM, 50, true);
    expect(text).toContain('"choices":[],"usage"');
    expect(text).not.toContain('[DONE]');
  });

  test('accepts spaced JSON from Python engines', () => {
    const { filter, text } = filterInPieces('data: {"choices": [], "usage": {"prompt_tokens": 1, "completion_tokens": 2}}\n\ndata: [DONE]\n\n', 5, false);
    expect(text).toBe('');
    expect(filter.usage).toEqual({ promptTokens: 1, completionTokens: 2, totalTokens: 3 });
  });

  test('an error event mid-stream fails the job with the engine body', () => {
    const filter = new SseEventFilter(false);
    expect(() => filter.push(Buffer.from('data: {"error":{"message":"boom"}}\n\n'))).toThrow(EngineFailure);
  });

  describe('with the engine model renamed to the catalog model', () => {
    const rename = modelRename('m', 'acme/catalog-model')!;
    const renamed = VLLM_STREAM.replaceAll('"model":"m"', '"model":"acme/catalog-model"');

    test('modelRename is needed only when the names differ', () => {
      expect(modelRename(undefined, 'x')).toBeUndefined();
      expect(modelRename('x', 'x')).toBeUndefined();
    });

    test.each([1, 2, 3, 7, 64, 100_000])('renames every event whatever the read size (%i bytes)', (pieceLength) => {
      const { filter, text } = filterInPieces(VLLM_STREAM, pieceLength, true, rename);
      const events = renamed.split('\n\n').map((event) => `${event}\n\n`);
      expect(text).toBe(events.slice(0, 4).join(''));
      expect(filter.usage).toEqual({ promptTokens: 9, completionTokens: 2, totalTokens: 11 });
      expect(filter.finishReason).toBe('stop');
      expect(filter.contentEvents).toBe(2);
    });

    test('at every split point, also where the usage chunk and [DONE] are dropped', () => {
      const expected = renamed.split('\n\n').map((event) => `${event}\n\n`).slice(0, 3).join('');
      const bytes = Buffer.from(VLLM_STREAM);
      for (let cut = 1; cut < bytes.length; cut++) {
        const filter = new SseEventFilter(false, rename);
        const out = [filter.push(bytes.subarray(0, cut)), filter.push(bytes.subarray(cut)), filter.end()].filter((part) => part !== undefined);
        expect(Buffer.concat(out).toString('utf8')).toBe(expected);
      }
    });

    test('leaves other names, other keys, escaped text and spaced JSON alone or handles them', () => {
      const stream = [
        'data: {"model":"mm","choices":[{"index":0,"delta":{"content":"a"}}]}\n\n',
        'data: {"choices":[{"index":0,"delta":{"content":"{\\"model\\":\\"m\\"}"}}],"model":"m"}\n\n',
        'data: {"model": "m", "choices": [{"index": 0, "delta": {"content": "b"}}]}\n\n',
        'data: {"id":"x","models":"m","choices":[{"index":0,"text":"c"}]}\n\n',
      ].join('');
      const { text } = filterInPieces(stream, 5, false, rename);
      expect(text).toBe([
        'data: {"model":"mm","choices":[{"index":0,"delta":{"content":"a"}}]}\n\n',
        'data: {"choices":[{"index":0,"delta":{"content":"{\\"model\\":\\"m\\"}"}}],"model":"acme/catalog-model"}\n\n',
        'data: {"model": "acme/catalog-model", "choices": [{"index": 0, "delta": {"content": "b"}}]}\n\n',
        'data: {"id":"x","models":"m","choices":[{"index":0,"text":"c"}]}\n\n',
      ].join(''));
    });

    test('an event without a rename passes through zero-copy', () => {
      const filter = new SseEventFilter(false, rename);
      const bytes = Buffer.from('data: {"model":"other","choices":[{"index":0,"delta":{"content":"a"}}]}\n\n');
      expect(filter.push(bytes)).toBe(bytes);
    });
  });
});
