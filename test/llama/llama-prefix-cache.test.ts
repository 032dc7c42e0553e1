/**
 * Prefix reuse in the llama.cpp engine: a request takes the free sequence whose cached tokens
 * share the longest prefix with its prompt, evaluates only the rest, and reports the reused
 * tokens as `usage.prompt_tokens_details.cached_tokens`. The answers must be exactly those of
 * a sequence that evaluated the whole prompt (compared with an engine whose reuse is off).
 */
import { chooseSequences, copySources, MIN_REUSED_PREFIX, PRESERVED_TAIL, reusablePrefix, SequencePool, worthReusing } from '../../worker-agent/llama/sequence-pool';
import { startEngineDriver, type DriverRequest, type DriverResult, type EngineDriver } from './support/engine-driver';
import { chatPromptTokens, modelDirectory, type ModelDirectory } from './support/tiny-model';

const range = (from: number, to: number) => Array.from({ length: to - from }, (_, index) => from + index);

describe('choosing a sequence by shared prefix', () => {
  const long = range(0, 100);

  it('keeps the common prefix, never the whole prompt, and nothing below the minimum', () => {
    expect(reusablePrefix(long, [...range(0, 40), 999])).toBe(40);
    // The prompt is exactly the cached tokens, or a prefix of them: its last token is evaluated again.
    expect(reusablePrefix(long, long)).toBe(99);
    expect(reusablePrefix(long, range(0, 30))).toBe(29);
    expect(reusablePrefix(range(0, 30), long)).toBe(30);
    // A template's first tokens are shared by every prompt: not worth a sequence.
    expect(reusablePrefix(long, [...range(0, MIN_REUSED_PREFIX - 1), 999])).toBe(0);
    expect(reusablePrefix(long, [...range(0, MIN_REUSED_PREFIX), 999])).toBe(MIN_REUSED_PREFIX);
    expect(reusablePrefix([], long)).toBe(0);
    expect(reusablePrefix(long, [0], 0)).toBe(0);
  });

  it('picks the longest prefix; ties and misses take the least recently used sequence', () => {
    const system = range(0, 50);
    const free = [
      { tokens: [...system, 1000, 1001], lastUsed: 3 },
      { tokens: [...system, 2000, ...range(0, 40)], lastUsed: 1 },
      { tokens: range(500, 600), lastUsed: 2 },
      { tokens: [], lastUsed: 4 },
    ];
    // Longest prefix wins over recency.
    expect(chooseSequences(free, [[...system, 2000, 7]])).toEqual([1]);
    // Equal prefixes: the least recently used of them.
    expect(chooseSequences(free, [[...system, 3000]])).toEqual([1]);
    // Nothing shared anywhere: an empty sequence (nothing to erase), else the least recently used.
    expect(chooseSequences(free, [range(900, 950)])).toEqual([3]);
    expect(chooseSequences(free.slice(0, 3), [range(900, 950)])).toEqual([1]);
    expect(chooseSequences(free.slice(2, 3), [range(900, 950)])).toEqual([0]);
    // A prefix the cache holds longer than the prompt (the prompt is a prefix of it).
    expect(chooseSequences(free, [range(500, 540)])).toEqual([2]);
  });

  it('does not erase a long cached history for a prefix that is small next to both it and the prompt', () => {
    const template = range(0, 21);
    const history = [...template, ...range(100, 860)];
    const newConversation = [...template, ...range(2000, 2700)];
    // 21 shared tokens: above the minimum, but under half the prompt and half the history.
    expect(reusablePrefix(history, newConversation)).toBe(21);
    expect(worthReusing(history, newConversation)).toBe(0);
    // So the new conversation takes the empty sequence and the history survives for its next turn.
    const free = [{ tokens: history, lastUsed: 1 }, { tokens: [], lastUsed: 2 }];
    expect(chooseSequences(free, [newConversation])).toEqual([1]);
    // The history's own next turn reuses it; a short cached system prompt is worth reusing for a long prompt.
    expect(worthReusing(history, [...history, 5, 6])).toBe(history.length);
    expect(worthReusing(range(0, 300), [...range(0, 300), ...range(5000, 5700)])).toBe(300);
  });

  it('gives several choices distinct sequences, best pairs first', () => {
    const free = [
      { tokens: range(0, 20), lastUsed: 0 },
      { tokens: range(0, 60), lastUsed: 1 },
      { tokens: range(300, 400), lastUsed: 2 },
    ];
    // Prompt 1 matches sequence 1 best; prompt 0 then takes sequence 0; prompt 2 matches 2.
    expect(chooseSequences(free, [range(0, 25), range(0, 80), range(300, 350)])).toEqual([0, 1, 2]);
    // n = 2 of one prompt: the best match, then the next.
    expect(chooseSequences(free, [range(0, 80), range(0, 80)])).toEqual([1, 0]);
    expect(() => chooseSequences(free, [[], [], [], []])).toThrow(RangeError);
  });

  it('hands a waiting request the sequences that match its prompts, in FIFO order', async () => {
    const held: Record<string, number[]> = { a: range(0, 40), b: range(100, 140) };
    const pool = new SequencePool(['a', 'b'], (sequence) => held[sequence]);
    const never = new AbortController().signal;
    expect(await pool.acquire(1, never, [range(100, 130)])).toEqual(['b']);
    expect(pool.busy).toBe(1);
    const both = await pool.acquire(1, never, [range(100, 130)]);
    // Only `a` is free: it is taken though it shares nothing.
    expect(both).toEqual(['a']);
    const waiting = pool.acquire(1, never, [range(0, 30)]);
    const later = pool.acquire(1, never, [range(100, 130)]);
    expect(pool.queued).toBe(2);
    pool.release(['b']);
    // FIFO: the first waiter gets the only free sequence, match or not.
    expect(await waiting).toEqual(['b']);
    pool.release(['a']);
    expect(await later).toEqual(['a']);
    expect(pool.queued).toBe(0);
    await expect(pool.acquire(1, never, [[], []])).rejects.toThrow(RangeError);
  });

  it('with copying, leaves a sequence holding a long foreign tail to a victim and names it as the copy source', () => {
    // `a` holds a shared system prompt (0..40) and another conversation's history (500..600); `b` is old and unrelated.
    const free = [{ tokens: [...range(0, 40), ...range(500, 600)], lastUsed: 5 }, { tokens: range(900, 950), lastUsed: 1 }];
    const prompt = [...range(0, 40), ...range(700, 720)];
    expect(chooseSequences(free, [prompt])).toEqual([0]); // no copying: take it, erasing the history
    const chosen = chooseSequences(free, [prompt], MIN_REUSED_PREFIX, true);
    expect(chosen).toEqual([1]);
    expect(copySources(free, [prompt], chosen)).toEqual([0]);
    // A short tail (the last answer, re-sent in other words) is not worth keeping: take it directly.
    const ownTurn = [{ tokens: [...range(0, 40), ...range(500, 500 + PRESERVED_TAIL - 1)], lastUsed: 5 }, free[1]];
    expect(chooseSequences(ownTurn, [prompt], MIN_REUSED_PREFIX, true)).toEqual([0]);
    expect(copySources(ownTurn, [prompt], [0])).toEqual([-1]);
  });

  it('pins a copy source until the copy is done: no other request takes it meanwhile', async () => {
    const held: Record<string, number[]> = { a: [...range(0, 40), ...range(500, 600)], b: range(900, 950), c: range(950, 990) };
    const pool = new SequencePool(['a', 'b', 'c'], (sequence) => held[sequence], 3, true);
    const never = new AbortController().signal;
    const [victim] = await pool.acquire(1, never, [[...range(0, 40), ...range(700, 720)]]);
    expect(victim).toBe('b');
    expect(pool.sourceOf('b')).toBe('a');
    // `a` is free but pinned: the next request, which would love it, gets another sequence and no copy.
    const wantsA = [...range(0, 40), ...range(500, 600), 1, 2];
    expect(await pool.acquire(1, never, [wantsA])).toEqual(['c']);
    expect(pool.sourceOf('c')).toBeNull();
    // Nothing else is free: the next waits, and gets `a` once the copy out of it is done.
    const next = pool.acquire(1, never, [wantsA]);
    expect(pool.queued).toBe(1);
    pool.copied('b');
    expect(pool.sourceOf('b')).toBeNull();
    expect(await next).toEqual(['a']);
  });

  it('lends at most maxLent sequences at once, choosing among every free one (the rest are a prompt cache)', async () => {
    const held: Record<string, number[]> = { a: range(0, 40), b: range(100, 140), c: range(200, 240) };
    const pool = new SequencePool(['a', 'b', 'c'], (sequence) => held[sequence], 1);
    const never = new AbortController().signal;
    expect(pool.size).toBe(1);
    await expect(pool.acquire(2, never)).rejects.toThrow(RangeError);
    expect(await pool.acquire(1, never, [range(200, 230)])).toEqual(['c']);
    // Two sequences are free, but one already runs: the next request waits for it.
    const waiting = pool.acquire(1, never, [range(0, 30)]);
    expect(pool.queued).toBe(1);
    pool.release(['c']);
    // And then takes the sequence holding its prefix, not the one just released.
    expect(await waiting).toEqual(['a']);
    expect(pool.busy).toBe(1);
  });
});

describe('llama.cpp prefix reuse', () => {
  let models: ModelDirectory;
  let driver: EngineDriver;
  const SYSTEM = 'You are a careful assistant for an inference serving platform. Answer in one short sentence. '.repeat(4).trim();
  const chat = (messages: Array<{ role: string; content: string }>, extra: Record<string, unknown> = {}) => ({
    messages, max_tokens: 24, temperature: 0, ...extra,
  });
  const first = [{ role: 'system', content: SYSTEM }, { role: 'user', content: 'What is a replica?' }];
  const second = [{ role: 'system', content: SYSTEM }, { role: 'user', content: 'How do deployments scale?' }];
  /** Tokens every chat with the system prompt starts with: BOS, the system turn, then `<|im_start|>user\n`. */
  const systemPrefix = chatPromptTokens([{ role: 'system', content: SYSTEM }]) - 'assistant\n'.length + 'user\n'.length;

  const cachedOf = (result: DriverResult) => (result.body ?? result.events.at(-1)).usage.prompt_tokens_details.cached_tokens;
  const textOf = (result: DriverResult, index = 0) => {
    expect(result.error).toBeUndefined();
    const choice = result.body.choices[index];
    return choice.message?.content ?? choice.text;
  };
  /** The same requests on the reusing engine and on one that evaluates every prompt whole. */
  const both = async (...requests: Array<Omit<DriverRequest, 'engine'>>) => {
    const cached = await driver.run(...requests.map((request) => ({ ...request, engine: 'cached' })));
    const fresh = await driver.run(...requests.map((request) => ({ ...request, engine: 'fresh' })));
    for (const result of fresh) expect(cachedOf(result)).toBe(0);
    return { cached, fresh };
  };

  beforeAll(async () => {
    models = modelDirectory();
    const modelPath = models.write('tiny-prefix.gguf', { contextLength: 2048 });
    driver = await startEngineDriver({
      cached: { modelPath, contextSize: 1024, parallel: 2 },
      fresh: { modelPath, contextSize: 1024, parallel: 2, prefixCache: false },
      kept: { modelPath, contextSize: 1024, parallel: 1, cachedSequences: 3 },
    });
  }, 60_000);

  afterAll(async () => {
    await driver?.close();
    models?.remove();
  });

  it('reuses a repeated prompt, a shared system prompt and an earlier turn, with the answers of a whole evaluation', async () => {
    const promptTokens = chatPromptTokens(first);
    const one = await both({ body: chat(first) });
    expect(cachedOf(one.cached[0])).toBe(0);
    expect(textOf(one.cached[0])).toBe(textOf(one.fresh[0]));
    expect(one.cached[0].body.usage).toEqual({
      prompt_tokens: promptTokens, completion_tokens: 24, total_tokens: promptTokens + 24, prompt_tokens_details: { cached_tokens: 0 },
    });

    // The very same prompt: all but its last token (evaluated again for the logits).
    const again = await both({ body: chat(first) });
    expect(cachedOf(again.cached[0])).toBe(promptTokens - 1);
    // …which the agent reports to the control plane as the job's cached tokens (Usage.cached_tokens); none when nothing was reused.
    expect(again.cached[0].usage).toEqual({ promptTokens, completionTokens: 24, totalTokens: promptTokens + 24, cachedTokens: promptTokens - 1 });
    expect(one.cached[0].usage).toEqual({ promptTokens, completionTokens: 24, totalTokens: promptTokens + 24 });
    expect(textOf(again.cached[0])).toBe(textOf(one.fresh[0]));

    // The next turn of the conversation: its prompt and the answer tokens, which were
    // evaluated one at a time while generating, are reused from the sequence that holds them.
    const turn = [...first, { role: 'assistant', content: textOf(one.fresh[0]) }, { role: 'user', content: 'And a deployment?' }];
    const next = await both({ body: chat(turn, { max_tokens: 32 }) });
    expect(cachedOf(next.cached[0])).toBe(promptTokens + 23);
    expect(textOf(next.cached[0])).toBe(textOf(next.fresh[0]));

    // Another question after the same system prompt: the system turn is reused.
    const other = await both({ body: chat(second) });
    expect(cachedOf(other.cached[0])).toBe(systemPrefix);
    expect(textOf(other.cached[0])).toBe(textOf(other.fresh[0]));
  });

  it('reports nothing cached for an unrelated prompt, and reuses a completion prompt that is a prefix of the cache', async () => {
    const story = 'Once upon a time, in a data centre far away, a tiny model answered every request it was given. '.repeat(2);
    const unrelated = await both({ kind: 'JOB_KIND_COMPLETION', body: { prompt: story, max_tokens: 16, temperature: 0 } });
    expect(cachedOf(unrelated.cached[0])).toBe(0);
    expect(textOf(unrelated.cached[0])).toBe(textOf(unrelated.fresh[0]));
    const shorter = story.slice(0, 120);
    const prefix = await both({ kind: 'JOB_KIND_COMPLETION', body: { prompt: shorter, max_tokens: 16, temperature: 0 } });
    expect(cachedOf(prefix.cached[0])).toBe(shorter.length - 1);
    expect(textOf(prefix.cached[0])).toBe(textOf(prefix.fresh[0]));
    // An unrelated chat shares only the template's first tokens: nothing is reused.
    const small = await both({ body: chat([{ role: 'user', content: 'Tell me a joke about GPUs, please.' }]) });
    expect(cachedOf(small.cached[0])).toBe(0);
  });

  it('sends each prompt to the sequence that holds its prefix, seeded sampling and n > 1 included', async () => {
    const alpha = [{ role: 'system', content: `Alpha. ${SYSTEM}` }, { role: 'user', content: 'one' }];
    const beta = [{ role: 'system', content: `Beta. ${SYSTEM}` }, { role: 'user', content: 'two' }];
    await driver.run({ engine: 'cached', body: chat(alpha) }, { engine: 'cached', body: chat(beta) });
    // Handed out in release order, one of the two would land on the other's sequence and miss.
    const sampled = { temperature: 0.9, seed: 11 };
    for (const messages of [beta, alpha]) {
      const { cached, fresh } = await both({ body: chat(messages, sampled) });
      expect(cachedOf(cached[0])).toBe(chatPromptTokens(messages) - 1);
      expect(textOf(cached[0])).toBe(textOf(fresh[0]));
    }
    // Two choices of one prompt: each on its own sequence, the prompt counted once, and the
    // cached count is what the best of them reused.
    const { cached, fresh } = await both({ body: chat(alpha, { n: 2, seed: 5, temperature: 1 }) });
    expect(cachedOf(cached[0])).toBe(chatPromptTokens(alpha) - 1);
    expect(cached[0].body.usage.prompt_tokens).toBe(chatPromptTokens(alpha));
    expect([textOf(cached[0], 0), textOf(cached[0], 1)]).toEqual([textOf(fresh[0], 0), textOf(fresh[0], 1)]);
  });

  it('keeps more conversations cached than it runs at once (cachedSequences beyond parallel)', async () => {
    const conversations = ['Gamma', 'Delta', 'Epsilon'].map((name) => [{ role: 'system', content: `${name}. ${SYSTEM}` }, { role: 'user', content: `hello from ${name}` }]);
    // One runs at a time; each first turn takes its own sequence (none shares its system prompt).
    for (const messages of conversations) expect(cachedOf((await driver.run({ engine: 'kept', body: chat(messages) }))[0])).toBe(0);
    // Every one is still held: each repeat reuses all but its last token.
    for (const messages of conversations) {
      expect(cachedOf((await driver.run({ engine: 'kept', body: chat(messages) }))[0])).toBe(chatPromptTokens(messages) - 1);
    }
  });

  it('copies a shared prefix into another sequence instead of erasing a conversation\'s history (two conversations of one application)', async () => {
    const system = { role: 'system', content: `Zeta. ${SYSTEM}` };
    const turnOne = (name: string) => [system, { role: 'user', content: `I am ${name}, with a question long enough to matter.` }];
    const turnTwo = (name: string) => [...turnOne(name), { role: 'assistant', content: 'noted' }, { role: 'user', content: 'and a follow-up' }];
    const cached = async (messages: Array<{ role: string; content: string }>) => cachedOf((await driver.run({ engine: 'kept', body: chat(messages) }))[0]);
    expect(await cached(turnOne('Ann'))).toBe(0);
    // Bob shares Zeta's system turn with Ann's sequence: copied into a sequence of its own.
    expect(await cached(turnOne('Bob'))).toBe(systemPrefix + 'Zeta. '.length + 'I am '.length);
    // Both histories survived: each next turn reuses its whole first turn's prompt.
    expect(await cached(turnTwo('Ann'))).toBe(chatPromptTokens(turnOne('Ann')));
    expect(await cached(turnTwo('Bob'))).toBe(chatPromptTokens(turnOne('Bob')));
  });

  it('reports cached tokens in the final streamed usage chunk, and load signals while busy and idle', async () => {
    const [plain] = await driver.run({ engine: 'cached', body: chat(second, { max_tokens: 40 }) });
    const body = chat(second, { stream: true, stream_options: { include_usage: true }, max_tokens: 40 });
    const [streamed] = await driver.run({ engine: 'cached', body, includeUsage: true });
    expect(streamed.events.at(-1).usage).toEqual({
      prompt_tokens: chatPromptTokens(second), completion_tokens: 40, total_tokens: chatPromptTokens(second) + 40,
      prompt_tokens_details: { cached_tokens: chatPromptTokens(second) - 1 },
    });
    expect(streamed.usage?.cachedTokens).toBe(chatPromptTokens(second) - 1);
    expect(streamed.events.map((event) => event.choices[0]?.delta?.content ?? '').join('')).toBe(textOf(plain));
    // While streaming: one sequence busy, holding (at least) the prompt.
    expect(streamed.streamingSignals).toMatchObject({ running: 1, waiting: 0 });
    expect(streamed.streamingSignals!.kvCacheUsage).toBeGreaterThanOrEqual(chatPromptTokens(second) / (1024 * 2));
    expect(streamed.signals).toMatchObject({ running: 0, waiting: 0, kvCacheUsage: 0 });
    expect(streamed.signals.prefixCacheHitRate!).toBeGreaterThan(0.3);
    expect(streamed.signals.prefixCacheHitRate).toBeLessThan(1);
    // Three requests for two sequences: one waits.
    const results = await driver.run(...[1, 2, 3].map((index) => ({ engine: 'cached', body: chat([{ role: 'user', content: `queue ${index}` }], { stream: true, max_tokens: 60 }) })));
    expect(Math.max(...results.map((result) => result.streamingSignals!.waiting))).toBe(1);
    const [fresh] = await driver.run({ engine: 'fresh', body: chat(first) });
    expect(fresh.signals.prefixCacheHitRate).toBe(0);
  });
});
