import { EngineFailure } from '../../worker-agent/engines/engine-failure';
import { defaultLlamaThreads } from '../../worker-agent/llama/llama-cpp-options';
import { choiceSeed, planLlamaRequest } from '../../worker-agent/llama/llama-request';
import { SequencePool } from '../../worker-agent/llama/sequence-pool';
import { StopMatcher } from '../../worker-agent/llama/stop-matcher';

const chat = (extra: Record<string, unknown> = {}) => planLlamaRequest({ messages: [{ role: 'user', content: 'hi' }], ...extra }, '/v1/chat/completions');
const completion = (extra: Record<string, unknown> = {}) => planLlamaRequest({ prompt: 'hi', ...extra }, '/v1/completions');

function rejection(run: () => unknown): { param: string; code: string; status?: number } {
  try {
    run();
  } catch (error) {
    expect(error).toBeInstanceOf(EngineFailure);
    const failure = error as EngineFailure;
    const body = JSON.parse(failure.engineBody!.toString()).error;
    return { param: body.param, code: body.code, status: failure.engineStatus };
  }
  throw new Error('expected a rejection');
}

describe('llama.cpp request planning', () => {
  it('uses OpenAI defaults: temperature 1, top_p 1, no top_k, chat until the context is full, completions 16 tokens', () => {
    expect(chat().sampling).toMatchObject({ temperature: 1, topP: 1, topK: 0, minP: 0, presencePenalty: 0, frequencyPenalty: 0, repetitionPenalty: 1 });
    expect(chat().maxTokens).toBeUndefined();
    expect(completion().maxTokens).toBe(16);
    expect(chat({ max_completion_tokens: 7, max_tokens: 9 }).maxTokens).toBe(7);
    expect(chat({ top_k: -1 }).sampling.topK).toBe(0);
  });

  it('maps seeds onto llama.cpp\'s 32-bit seeds, one per choice, and picks a random one when absent', () => {
    const plan = chat({ seed: -1, n: 3 });
    expect(plan.sampling.seed).toBe(2 ** 32 - 1);
    expect([0, 1, 2].map((index) => choiceSeed(plan.sampling, index))).toEqual([2 ** 32 - 1, 0, 1]);
    expect(chat().sampling.seed).toBeGreaterThanOrEqual(0);
  });

  it('reads chat content parts and developer messages; completions take strings or token ids', () => {
    const plan = chat({ messages: [{ role: 'developer', content: 'be short' }, { role: 'user', content: [{ type: 'text', text: 'a' }, { type: 'text', text: 'b' }] }, { role: 'assistant', content: null }] });
    expect(plan.messages).toEqual([{ role: 'system', content: 'be short' }, { role: 'user', content: 'a\nb' }, { role: 'assistant', content: '' }]);
    expect(completion({ prompt: ['a', 'b'] }).prompts).toEqual([{ text: 'a' }, { text: 'b' }]);
    expect(completion({ prompt: [1, 2, 3] }).prompts).toEqual([{ tokens: [1, 2, 3] }]);
    expect(completion({ prompt: [[1], [2]] }).prompts).toEqual([{ tokens: [1] }, { tokens: [2] }]);
    expect(completion({ echo: true }).echo).toBe(true);
    expect(completion({ logprobs: 0 }).kind).toBe('completion');
  });

  it('keeps stop sequences and logit_bias, and refuses malformed values with the field named', () => {
    expect(chat({ stop: 'END' }).stop).toEqual(['END']);
    expect(chat({ stop: ['a', ''] }).stop).toEqual(['a']);
    expect([...chat({ logit_bias: { 65: -100, 66: 5 } }).sampling.logitBias]).toEqual([[65, -100], [66, 5]]);
    expect(rejection(() => chat({ stop: ['a', 'b', 'c', 'd', 'e'] }))).toMatchObject({ param: 'stop', status: 400 });
    expect(rejection(() => chat({ logit_bias: { x: 1 } }))).toMatchObject({ param: 'logit_bias' });
    expect(rejection(() => chat({ temperature: -1 }))).toMatchObject({ param: 'temperature' });
    expect(rejection(() => chat({ top_p: 2 }))).toMatchObject({ param: 'top_p' });
    expect(rejection(() => chat({ frequency_penalty: 2.5 }))).toMatchObject({ param: 'frequency_penalty' });
    expect(rejection(() => chat({ max_tokens: 0 }))).toMatchObject({ param: 'max_tokens' });
    expect(rejection(() => chat({ messages: [] }))).toMatchObject({ param: 'messages', code: 'missing_required_parameter' });
    expect(rejection(() => chat({ messages: [{ role: 'robot', content: 'x' }] }))).toMatchObject({ param: 'messages[0].role' });
    expect(rejection(() => completion({ prompt: 5 }))).toMatchObject({ param: 'prompt' });
  });

  it('refuses features llama.cpp does not offer here, clearly', () => {
    const unsupported = (run: () => unknown, param: string) => expect(rejection(run)).toEqual({ param, code: 'unsupported_parameter', status: 400 });
    unsupported(() => chat({ logprobs: true }), 'logprobs');
    unsupported(() => chat({ top_logprobs: 2 }), 'top_logprobs');
    unsupported(() => completion({ logprobs: 2 }), 'logprobs');
    unsupported(() => chat({ tools: [{}] }), 'tools[0].type');
    unsupported(() => completion({ tools: [{ type: 'function', function: { name: 'f' } }] }), 'tools');
    unsupported(() => chat({ functions: [{ name: 'f' }] }), 'functions');
    unsupported(() => chat({ response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'string', pattern: 'a+' } } } }), 'response_format.json_schema.schema.pattern');
    unsupported(() => completion({ suffix: 'x' }), 'suffix');
    unsupported(() => completion({ best_of: 3 }), 'best_of');
    unsupported(() => chat({ messages: [{ role: 'function', name: 'f', content: 'x' }] }), 'messages[0].role');
    unsupported(() => chat({ messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'x' } }] }] }), 'messages[0].content[0]');
    // Harmless values of the same fields are accepted.
    expect(chat({ logprobs: false, tools: [], tool_choice: 'none', response_format: { type: 'text' } }).kind).toBe('chat');
  });
});

describe('stop sequences in a stream', () => {
  it('holds back a tail that could become a stop sequence and cuts right before it', () => {
    const matcher = new StopMatcher(['\n\nUser:']);
    expect(matcher.push('Hello')).toEqual({ text: 'Hello', stopped: false });
    expect(matcher.push(' there\n')).toEqual({ text: ' there', stopped: false });
    expect(matcher.push('\nUs')).toEqual({ text: '', stopped: false });
    expect(matcher.push('ual')).toEqual({ text: '\n\nUsual', stopped: false });
    expect(matcher.push('\n\nUser: hi')).toEqual({ text: '', stopped: true });
  });

  it('takes the earliest of several stops and releases held text when generation ends otherwise', () => {
    const matcher = new StopMatcher(['bc', 'abcd']);
    // "ab" may still become "abcd": held back.
    expect(matcher.push('xab')).toEqual({ text: 'x', stopped: false });
    expect(matcher.push('c')).toEqual({ text: 'a', stopped: true });
    const open = new StopMatcher(['END']);
    expect(open.push('the E')).toEqual({ text: 'the ', stopped: false });
    expect(open.flush()).toBe('E');
    expect(new StopMatcher([]).push('anything')).toEqual({ text: 'anything', stopped: false });
  });
});

describe('sequence pool', () => {
  it('hands out sequences first come, first served, all of a request at once', async () => {
    const pool = new SequencePool(['a', 'b']);
    const never = new AbortController().signal;
    const first = await pool.acquire(1, never);
    const both = pool.acquire(2, never);
    const single = pool.acquire(1, never);
    let bothDone = false;
    void both.then(() => { bothDone = true; });
    await new Promise((resolve) => setImmediate(resolve));
    expect(bothDone).toBe(false);
    pool.release(first);
    expect((await both).sort()).toEqual(['a', 'b']);
    pool.release(await both);
    expect(await single).toHaveLength(1);
    await expect(pool.acquire(3, never)).rejects.toThrow(RangeError);
  });

  it('drops a waiter whose request is canceled', async () => {
    const pool = new SequencePool(['a']);
    const held = await pool.acquire(1, new AbortController().signal);
    const canceled = new AbortController();
    const waiting = pool.acquire(1, canceled.signal);
    canceled.abort(new Error('client went away'));
    await expect(waiting).rejects.toThrow('client went away');
    pool.release(held);
    expect(await pool.acquire(1, new AbortController().signal)).toEqual(['a']);
  });
});

describe('thread default', () => {
  it('is half the cores, at least 1 and at most 4', () => {
    expect([1, 2, 3, 4, 8, 64].map((cores) => defaultLlamaThreads(cores))).toEqual([1, 1, 1, 2, 4, 4]);
  });
});
