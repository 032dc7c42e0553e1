import { performance } from 'node:perf_hooks';
import { CpuEngine } from '../../worker-agent/engines/cpu-engine';
import { DEFAULT_CPU_ENGINE_OPTIONS, loadCpuEngineOptions, type CpuEngineOptions } from '../../worker-agent/engines/cpu-engine-options';
import { blockKeys, CpuPrefixSimulator, cpuPrefixSimulator, PrefixBlockCache, type PrefillClock } from '../../worker-agent/engines/cpu-prefix-cache';
import { startCpuEngineServer } from '../../worker-agent/engines/cpu-engine-server';
import { countTokens, tokenize } from '../../worker-agent/engines/cpu-tokenizer';
import { engineJob, runEngine, sseEvents } from './support/engine-harness';

/** `count` distinct one-token words: w0 w1 w2 … */
function words(count: number, prefix = 'w'): string {
  return Array.from({ length: count }, (_, index) => `${prefix}${index}`).join(' ');
}

/** Simulated time: sleeps wake in order of their deadline when the test runs the clock. */
class FakeClock implements PrefillClock {
  private time = 0;
  private timers: Array<{ at: number; wake: () => void }> = [];
  readonly sleeps: number[] = [];

  now(): number {
    return this.time;
  }

  sleep(milliseconds: number): Promise<void> {
    this.sleeps.push(milliseconds);
    return new Promise((resolve) => this.timers.push({ at: this.time + milliseconds, wake: resolve }));
  }

  /** Runs until nothing sleeps any more, letting promise callbacks run between wake-ups. */
  async runAll(): Promise<void> {
    for (;;) {
      await new Promise((resolve) => setImmediate(resolve));
      if (this.timers.length === 0) return;
      this.timers.sort((a, b) => a.at - b.at);
      const next = this.timers.shift()!;
      this.time = Math.max(this.time, next.at);
      next.wake();
    }
  }
}

function simulator(prefillMicrosPerToken: number, prefixCacheTokens: number, clock = new FakeClock()) {
  return { clock, lane: new CpuPrefixSimulator({ prefillMicrosPerToken, prefixCacheTokens }, clock) };
}

/** Runs prefills concurrently on a fake clock; each answer with the simulated time it finished at. */
async function prefillAll(lane: CpuPrefixSimulator, clock: FakeClock, prompts: string[]) {
  const finished = prompts.map((prompt) => lane.prefill([prompt]).then((result) => ({ ...result, at: clock.now() })));
  await clock.runAll();
  return Promise.all(finished);
}

describe('block keys', () => {
  test('one key per full block of 16 tokens, none for the partial tail', () => {
    expect(blockKeys(tokenize(words(15)))).toHaveLength(0);
    expect(blockKeys(tokenize(words(16)))).toHaveLength(1);
    expect(blockKeys(tokenize(words(47)))).toHaveLength(2);
  });

  test('chain hashes: a key names the whole prefix up to its block', () => {
    const base = blockKeys(tokenize(words(48)));
    expect(new Set(base).size).toBe(3);
    // Same leading blocks, whatever follows.
    expect(blockKeys(tokenize(`${words(32)} something else entirely and more`)).slice(0, 2)).toEqual(base.slice(0, 2));
    // A change in block 0 changes every later key, even where the later blocks' tokens are equal.
    const changedHead = blockKeys(tokenize(`x ${words(48).split(' ').slice(1).join(' ')}`));
    changedHead.forEach((key, index) => expect(key).not.toBe(base[index]));
    // A change in block 1 keeps block 0's key.
    const tokens = tokenize(words(48));
    tokens[20] = 'changed';
    const changedMiddle = blockKeys(tokens);
    expect(changedMiddle[0]).toBe(base[0]);
    expect(changedMiddle[1]).not.toBe(base[1]);
    expect(changedMiddle[2]).not.toBe(base[2]);
  });

  test('tokens are not glued together: ["ab","c"] and ["a","bc"] differ', () => {
    const rest: string[] = Array(14).fill('t');
    expect(blockKeys(['ab', 'c', ...rest])[0]).not.toBe(blockKeys(['a', 'bc', ...rest])[0]);
  });
});

describe('salted block keys (one chain per tenant, as vLLM hashes cache_salt into the first block)', () => {
  const tokens = tokenize(words(48));
  const A = 'a'.repeat(43);
  const B = 'b'.repeat(43);

  test('two salts share no key for the same tokens; one salt always gives the same keys', () => {
    const salted = blockKeys(tokens, 16, A);
    expect(salted).toHaveLength(3);
    expect(blockKeys(tokens, 16, A)).toEqual(salted);
    const other = blockKeys(tokens, 16, B);
    const unsalted = blockKeys(tokens);
    for (const key of salted) {
      expect(other).not.toContain(key);
      expect(unsalted).not.toContain(key);
    }
  });

  test('a salt cannot pose as a block key of an unsalted chain', () => {
    const unsalted = blockKeys(tokens);
    // An unsalted chain's block 1 hashes block 0's key: a salt equal to that key still gives other keys.
    expect(blockKeys(tokens.slice(16), 16, unsalted[0])[0]).not.toBe(unsalted[1]);
  });

  test('the simulator reuses a prefix only for the salt that cached it', async () => {
    const { clock, lane } = simulator(1000, 1024);
    const prompt = words(64);
    const run = async (salt: string) => {
      const result = lane.prefill([prompt], undefined, salt);
      await clock.runAll();
      return (await result).cachedTokens;
    };
    expect(await run(A)).toBe(0);
    expect(await run(B)).toBe(0);
    expect(await run(A)).toBe(64);
    expect(await run(B)).toBe(64);
    expect(await run('')).toBe(0);
    // Time follows: a miss pays every token, a hit none of its cached ones.
    const before = clock.now();
    await run('c'.repeat(43));
    expect(clock.now() - before).toBe(64);
  });
});

describe('PrefixBlockCache', () => {
  test('the cached prefix is the longest run of leading blocks present', () => {
    const cache = new PrefixBlockCache(10);
    const keys = blockKeys(tokenize(words(64)));
    expect(cache.cachedBlocks(keys)).toBe(0);
    cache.insert(keys.slice(0, 2));
    expect(cache.cachedBlocks(keys)).toBe(2);
    // A block present after a gap does not count.
    const other = new PrefixBlockCache(10);
    other.insert([keys[0], keys[2], keys[3]]);
    expect(other.cachedBlocks(keys)).toBe(1);
  });

  test('evicts least recently used blocks beyond its capacity, a prompt\'s tail first', () => {
    const cache = new PrefixBlockCache(4);
    const a = blockKeys(tokenize(words(48, 'a')));
    const b = blockKeys(tokenize(words(32, 'b')));
    cache.insert(a);
    expect(cache.size).toBe(3);
    cache.insert(b);
    expect(cache.size).toBe(4);
    // a's tail went first: its head is still reusable.
    expect(cache.cachedBlocks(a)).toBe(2);
    expect(cache.cachedBlocks(b)).toBe(2);
    // Refreshing a makes b the least recently used: b's tail, then its head, go.
    cache.insert(a);
    expect(cache.cachedBlocks(a)).toBe(3);
    expect(cache.size).toBe(4);
    expect(cache.cachedBlocks(b)).toBe(1);
    expect(cache.has(b[1])).toBe(false);
  });

  test('a cache of no blocks holds nothing', () => {
    const cache = new PrefixBlockCache(0);
    cache.insert(blockKeys(tokenize(words(32))));
    expect(cache.size).toBe(0);
  });
});

describe('CpuPrefixSimulator', () => {
  test('is off by default: no simulation from the default options', () => {
    expect(cpuPrefixSimulator(DEFAULT_CPU_ENGINE_OPTIONS)).toBeUndefined();
    expect(cpuPrefixSimulator(loadCpuEngineOptions({}))).toBeUndefined();
    expect(cpuPrefixSimulator({ prefixCacheTokens: 64 })).toBeInstanceOf(CpuPrefixSimulator);
    expect(cpuPrefixSimulator({ prefillMicrosPerToken: 5 })).toBeInstanceOf(CpuPrefixSimulator);
  });

  test('reads its options from WORKER_CPU_PREFILL_US_PER_TOKEN and WORKER_CPU_PREFIX_CACHE_TOKENS', () => {
    const options = loadCpuEngineOptions({ WORKER_CPU_PREFILL_US_PER_TOKEN: '12.5', WORKER_CPU_PREFIX_CACHE_TOKENS: '4096' });
    expect(options).toMatchObject({ prefillMicrosPerToken: 12.5, prefixCacheTokens: 4096 });
    expect(() => loadCpuEngineOptions({ WORKER_CPU_PREFIX_CACHE_TOKENS: '-1' })).toThrow(/WORKER_CPU_PREFIX_CACHE_TOKENS/);
  });

  test('prefill time is the uncached tokens times the cost per token', async () => {
    const { clock, lane } = simulator(1000, 1024);
    const prompt = words(100);
    const [first] = await prefillAll(lane, clock, [prompt]);
    expect(first).toEqual({ promptTokens: 100, cachedTokens: 0, at: 100 });
    // The same prompt again: 6 full blocks (96 tokens) cached, 4 to compute.
    const [second] = await prefillAll(lane, clock, [prompt]);
    expect(second).toMatchObject({ promptTokens: 100, cachedTokens: 96 });
    expect(second.at - first.at).toBe(4);
    // A longer turn of the same conversation: 96 cached, 54 to compute.
    const [third] = await prefillAll(lane, clock, [`${prompt} ${words(50, 'x')}`]);
    expect(third).toMatchObject({ promptTokens: 150, cachedTokens: 96 });
    expect(third.at - second.at).toBe(54);
    expect(clock.sleeps).toEqual([100, 4, 54]);
  });

  test('prefills serialize on the lane: the second waits for the first', async () => {
    const { clock, lane } = simulator(1000, 0);
    const [a, b, c] = await prefillAll(lane, clock, [words(40, 'a'), words(20, 'b'), words(10, 'c')]);
    expect([a.at, b.at, c.at]).toEqual([40, 60, 70]);
  });

  test('a prefill queued behind the same prompt finds it cached', async () => {
    const { clock, lane } = simulator(1000, 1024);
    const [a, b] = await prefillAll(lane, clock, [words(64), words(64)]);
    expect(a).toMatchObject({ cachedTokens: 0, at: 64 });
    expect(b).toMatchObject({ cachedTokens: 64, at: 64 });
  });

  test('reports waiting prefills, KV-cache use and the hit rate', async () => {
    const { clock, lane } = simulator(1000, 160);
    expect(lane.signals()).toEqual({ kvCacheUsage: 0, prefixCacheHitRate: null });
    const pending = [lane.prefill([words(64)]), lane.prefill([words(64)]), lane.prefill([words(64)])];
    await new Promise((resolve) => setImmediate(resolve));
    expect(lane.waiting).toBe(2);
    await clock.runAll();
    await Promise.all(pending);
    expect(lane.waiting).toBe(0);
    // 4 blocks of 10; 128 of 192 prompt tokens were cached.
    expect(lane.signals()).toEqual({ kvCacheUsage: 0.4, prefixCacheHitRate: 128 / 192 });
  });

  test('an aborted prefill leaves the lane at once and caches nothing', async () => {
    const { clock, lane } = simulator(1000, 1024);
    const abort = new AbortController();
    const first = lane.prefill([words(50, 'a')]);
    const aborted = lane.prefill([words(32, 'b')], abort.signal);
    const third = lane.prefill([words(10, 'c')]).then(() => clock.now());
    abort.abort(new Error('client went away'));
    await expect(aborted).rejects.toThrow('client went away');
    await clock.runAll();
    await first;
    expect(await third).toBe(60);
    expect(lane.cache.cachedBlocks(blockKeys(tokenize(words(32, 'b'))))).toBe(0);
    expect(lane.waiting).toBe(0);
  });
});

describe('CpuEngine with the simulated prefix cache', () => {
  const system = `You answer questions about the platform. ${words(200, 's')}.`;
  const turn1 = [{ role: 'system', content: system }, { role: 'user', content: 'What is a replica?' }];
  const turn2 = [...turn1, { role: 'assistant', content: 'A copy of the model serving requests.' }, { role: 'user', content: 'And a deployment?' }];

  async function chat(engine: CpuEngine, body: Record<string, unknown>) {
    const started = performance.now();
    const run = await runEngine(engine, engineJob({ max_tokens: 3, ...body }));
    if (run.error) throw run.error;
    return { run, ms: performance.now() - started };
  }

  test('off by default: usage without details, plain and streamed; the same text as with the simulation on', async () => {
    const plain = new CpuEngine();
    const { run } = await chat(plain, { messages: turn1, seed: 4 });
    const body = JSON.parse(run.outputs[0].data.toString('utf8'));
    const promptTokens = countTokens(`${system}\nWhat is a replica?`);
    expect(body.usage).toEqual({ prompt_tokens: promptTokens, completion_tokens: 3, total_tokens: promptTokens + 3 });
    const streamed = sseEvents((await chat(plain, { messages: turn1, seed: 4, stream: true, stream_options: { include_usage: true } })).run.text);
    expect(streamed.find((event) => event !== '[DONE]' && event.usage)).toMatchObject({ choices: [], usage: body.usage });
    expect(JSON.stringify(streamed)).not.toContain('prompt_tokens_details');
    expect(plain.signals()).toEqual({ running: 0, waiting: 0, kvCacheUsage: 0, prefixCacheHitRate: 0 });
    // The same text as an engine with the simulation on (only usage differs).
    const simulated = new CpuEngine({ ...DEFAULT_CPU_ENGINE_OPTIONS, prefixCacheTokens: 1024 });
    const other = JSON.parse((await chat(simulated, { messages: turn1, seed: 4 })).run.outputs[0].data.toString('utf8'));
    expect(other.choices).toEqual(body.choices);
  });

  test('reports cached tokens in usage, and the second turn starts sooner', async () => {
    const options: CpuEngineOptions = { ...DEFAULT_CPU_ENGINE_OPTIONS, prefillMicrosPerToken: 1500, prefixCacheTokens: 4096 };
    const engine = new CpuEngine(options);
    const first = await chat(engine, { messages: turn1 });
    const firstBody = JSON.parse(first.run.outputs[0].data.toString('utf8'));
    const promptTokens = firstBody.usage.prompt_tokens as number;
    expect(promptTokens).toBeGreaterThan(200);
    expect(firstBody.usage.prompt_tokens_details).toEqual({ cached_tokens: 0 });
    expect(first.run.result?.usage.promptTokens).toBe(promptTokens);
    // ~1.5 ms a token: over 300 ms for the first turn.
    expect(first.ms).toBeGreaterThanOrEqual(promptTokens * 1.5 - 5);

    const second = await chat(engine, { messages: turn2, stream: true, stream_options: { include_usage: true } });
    const usage = sseEvents(second.run.text).find((event) => event !== '[DONE]' && event.usage)!;
    if (usage === '[DONE]') throw new Error('no usage chunk');
    const cached = Math.floor(promptTokens / 16) * 16;
    expect(usage.usage.prompt_tokens_details).toEqual({ cached_tokens: cached });
    const uncached = (usage.usage.prompt_tokens as number) - cached;
    expect(uncached).toBeLessThan(30);
    expect(second.ms).toBeLessThan(first.ms / 3);
    expect(engine.signals()).toMatchObject({ running: 0, waiting: 0 });
    expect(engine.signals().prefixCacheHitRate).toBeCloseTo(cached / (promptTokens + (usage.usage.prompt_tokens as number)), 6);
    expect(engine.signals().kvCacheUsage).toBeCloseTo(Math.floor((usage.usage.prompt_tokens as number) / 16) / 256, 6);
  });

  test('concurrent prefills on one engine queue: the later one waits in the engine', async () => {
    const engine = new CpuEngine({ ...DEFAULT_CPU_ENGINE_OPTIONS, prefillMicrosPerToken: 2000 });
    const a = chat(engine, { messages: [{ role: 'user', content: words(150, 'a') }] });
    const b = chat(engine, { messages: [{ role: 'user', content: words(150, 'b') }] });
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(engine.signals()).toMatchObject({ running: 1, waiting: 1 });
    const [first, second] = await Promise.all([a, b]);
    // 300 ms each, one after the other.
    expect(Math.max(first.ms, second.ms)).toBeGreaterThanOrEqual(595);
    // No cache: nothing is reused.
    expect(JSON.parse(second.run.outputs[0].data.toString('utf8')).usage.prompt_tokens_details).toEqual({ cached_tokens: 0 });
  });

  test('a job reuses only its own tenant\'s prefix (its cache salt); a guest job without one reuses nothing', async () => {
    const engine = new CpuEngine({ ...DEFAULT_CPU_ENGINE_OPTIONS, prefixCacheTokens: 4096 });
    const cached = async (overrides: Parameters<typeof engineJob>[1]) => {
      const run = await runEngine(engine, engineJob({ messages: turn1, max_tokens: 2 }, overrides));
      if (run.error) throw run.error;
      return JSON.parse(run.outputs[0].data.toString('utf8')).usage.prompt_tokens_details.cached_tokens as number;
    };
    const owner = { cacheSalt: 'o'.repeat(43) };
    const guest = { cacheSalt: 'g'.repeat(43), guest: true };
    expect(await cached(owner)).toBe(0);
    expect(await cached(owner)).toBeGreaterThan(200);
    expect(await cached(guest)).toBe(0);
    expect(await cached(guest)).toBeGreaterThan(200);
    // A guest job from a control plane older than the salt: a tenant of its own, every time.
    expect(await cached({ guest: true, jobId: 'job_old_1' })).toBe(0);
    expect(await cached({ guest: true, jobId: 'job_old_2' })).toBe(0);
    // Unsalted owner jobs share the unsalted tenant, as every job did before salts.
    expect(await cached({})).toBe(0);
    expect(await cached({})).toBeGreaterThan(200);
  });

  test('the HTTP server keeps one cache for all its requests, and keys it by the body\'s cache_salt as vLLM does', async () => {
    const server = await startCpuEngineServer({ options: { prefixCacheTokens: 1024 } });
    try {
      const post = async (prompt: string, salt?: string) => {
        const response = await fetch(`${server.url}/v1/completions`, {
          method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ prompt, max_tokens: 2, ...(salt ? { cache_salt: salt } : {}) }),
        });
        return (await response.json()).usage;
      };
      expect(await post(words(40))).toMatchObject({ prompt_tokens: 40, prompt_tokens_details: { cached_tokens: 0 } });
      expect(await post(`${words(40)} more`)).toMatchObject({ prompt_tokens: 41, prompt_tokens_details: { cached_tokens: 32 } });
      expect(await post(`${words(40)} more`, 'tenant-a')).toMatchObject({ prompt_tokens_details: { cached_tokens: 0 } });
      expect(await post(`${words(40)} again`, 'tenant-a')).toMatchObject({ prompt_tokens_details: { cached_tokens: 32 } });
      const refused = await fetch(`${server.url}/v1/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ prompt: 'x', cache_salt: '' }) });
      expect(refused.status).toBe(400);
      expect((await refused.json()).error).toMatchObject({ param: 'cache_salt' });
    } finally {
      await server.close();
    }
  });
});
