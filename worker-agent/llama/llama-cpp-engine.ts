/**
 * Real inference on the CPU: a GGUF model run by llama.cpp (through node-llama-cpp) inside
 * the agent's process. It answers with the same OpenAI bytes an HTTP engine would and feeds
 * them through the same forwarding path, so usage, the finish reason and the include_usage
 * filter work exactly as for vLLM. Loading happens in `start()`, reported as load progress on
 * the agent's heartbeats: a replica is Running only once its model is loaded.
 */
import path from 'node:path';
import type { LlamaGrammar, Token } from 'node-llama-cpp';
import type { Usage } from '../../proto/worker/v1/index';
import type { AgentLogger } from '../agent-logger';
import type { JobCancellation } from '../job-cancellation';
import { generateChoice, type ChoiceProgress, type ChoiceRequest, type ChoiceResult } from './choice-generator';
import { choiceSeed, planLlamaRequest, type LlamaRequestPlan } from './llama-request';
import { invalidRequestFailure } from '../engines/request-fields';
import { chunkFormat, completionBody, DONE_EVENT, type OpenAiUsage } from './llama-response-format';
import { LlamaBackend } from './llama-backend';
import { LlamaGrammars } from './llama-grammar';
import { finishChoice, ToolCallStream } from './tool-call-answer';
import { LlamaEmbedder } from './llama-embeddings';
import { LlamaRuntime, type RenderedPrompt } from './llama-runtime';
import type { Engine, EngineHealthReport, EngineJob, EngineResult, EngineSink, LoadProgress } from '../engines/engine';
import { EngineFailure } from '../engines/engine-failure';
import { EngineStartError } from '../engines/engine-start-error';
import { cacheTenantOf } from '../engines/cache-tenant';
import { prepareEngineRequest } from '../engines/engine-request';
import { forwardJsonBody, StreamForwarder } from '../engines/engine-response';
import { DEFAULT_LLAMA_CONTEXT_SIZE } from './llama-cpp-options';
import type { LoraCapacity } from '../engines/adapter-options';
import { adapterLoadFailed } from '../engines/adapter-failure';
import type { AdapterResidencyView } from '../engines/adapter-slots';
import type { AdapterStore } from '../engines/adapter-store';
import { LlamaAdapters } from './llama-adapters';
import type { ModelCache, ModelSource } from '../engines/model-cache';
import type { StartupPhases } from '../startup-phases';

export interface LlamaCppEngineOptions {
  /** The GGUF file; or `modelSource` with `modelCache`, where it is fetched into first. */
  readonly modelPath?: string;
  readonly modelSource?: ModelSource;
  readonly modelCache?: ModelCache;
  readonly threads: number;
  /** Tokens per sequence; undefined = 4096 or the model's training context if smaller. */
  readonly contextSize?: number;
  readonly parallel: number;
  /** Sequences the context keeps for prefix reuse (at least `parallel`). @default parallel */
  readonly cachedSequences?: number;
  /**
   * Reuse the longest prompt prefix a sequence still holds from an earlier request (reported
   * as `usage.prompt_tokens_details.cached_tokens`). @default true
   */
  readonly prefixCache?: boolean;
  /** GGUF LoRA adapters (llama-adapters.ts): one context each, at most `maxLoras`; absent or 0: none. */
  readonly adapters?: { readonly capacity: LoraCapacity; readonly store: AdapterStore };
}

/** What the engine is doing now, for load reporting (heartbeats, routing). */
export interface LlamaEngineSignals {
  /** Sequences (parallel slots) lent to requests. */
  readonly running: number;
  /** Requests waiting for free sequences. */
  readonly waiting: number;
  /**
   * Fraction, 0–1, of the context's token cells (context size × sequences) held by busy
   * sequences. Tokens idle sequences keep for prefix reuse are not counted: any request may
   * take them over (vLLM counts its evictable cached blocks as free the same way).
   */
  readonly kvCacheUsage: number;
  /**
   * Prompt tokens reused from cache / prompt tokens, 0–1, over the last 1,000 prompt
   * evaluations (one per choice); null before the first.
   */
  readonly prefixCacheHitRate: number | null;
}

/** Times `work` as a start-up phase when the agent records phases; runs it plainly otherwise. */
async function timed<T>(phases: StartupPhases | undefined, name: 'download' | 'load' | 'warm_up', work: () => Promise<T>, outcome: (result: T) => { detail?: string; bytes?: number }): Promise<T> {
  return phases ? await phases.time(name, work, outcome) : await work();
}

function formatBytes(bytes: number): string {
  if (bytes >= 1024 ** 3) return `${(bytes / 1024 ** 3).toFixed(2)} GiB`;
  if (bytes >= 1024 ** 2) return `${(bytes / 1024 ** 2).toFixed(1)} MiB`;
  return `${(bytes / 1024).toFixed(1)} KiB`;
}

const HEALTHY: EngineHealthReport = Object.freeze({ status: 'ENGINE_HEALTH_HEALTHY', detail: '' });
const NOT_LOADED: EngineHealthReport = Object.freeze({ status: 'ENGINE_HEALTH_UNHEALTHY', detail: 'model not loaded' });

interface PlannedChoice extends ChoiceRequest {
  /** Completions with `echo`: the prompt text the choice starts with. */
  readonly echo: string;
}

export class LlamaCppEngine implements Engine {
  readonly kind = 'llama-cpp';
  readonly url = '';
  /** llama.cpp has no request priority (llama.cpp#22916): the agent's owner-first queue is the order. */
  readonly priorityCapable = true;
  version = '';
  private backend: LlamaBackend | null = null;
  private runtime: LlamaRuntime | null = null;
  private embedder: LlamaEmbedder | null = null;
  private grammars: LlamaGrammars | null = null;

  /** The adapters' contexts; undefined when the replica serves none. */
  readonly loras: LlamaAdapters | undefined;

  constructor(private readonly options: LlamaCppEngineOptions, private readonly logger: AgentLogger) {
    const adapters = options.adapters;
    this.loras = adapters && adapters.capacity.maxLoras > 0 ? new LlamaAdapters(adapters.capacity, adapters.store, () => this.runtime, options.threads) : undefined;
  }

  get adapters(): AdapterResidencyView | undefined {
    return this.loras?.slots;
  }

  /** Where the GGUF file is once fetched (or the local one). */
  private modelPath: string | undefined;

  /** Opens llama.cpp (for Hello's version) and checks a local model file; quick. Throws `EngineStartError`. */
  async prepare(): Promise<void> {
    if (this.options.modelPath !== undefined) await LlamaRuntime.checkModelFile(this.options.modelPath);
    this.backend = await LlamaBackend.open({
      threads: this.options.threads, log: (level, message) => this.logger[level]({ llamaCpp: message }, 'llama.cpp'),
    });
    this.version = this.backend.version;
    this.grammars = new LlamaGrammars(this.backend.llama);
  }

  /**
   * Fetches the model file into the weights cache when it comes from a URL (`download`), loads it
   * (`load`) and decodes one token (`warm_up`: llama.cpp's first evaluation allocates its compute
   * buffers, which a first request would otherwise wait for), reporting progress and timing each
   * phase. Throws `EngineStartError` when it cannot be served.
   */
  async start(progress?: LoadProgress, phases?: StartupPhases): Promise<void> {
    if (!this.backend) await this.prepare();
    const source = this.options.modelSource;
    // A download takes the first half of the progress bar; the load the rest. The bar never goes
    // back (llama.cpp may report a late fraction below an earlier one).
    const loadShare = source ? 0.5 : 1;
    let highest = 0;
    const report = (percent: number, stage: string) => {
      highest = Math.max(highest, percent);
      progress?.(highest, stage);
    };
    if (source) {
      const cache = this.options.modelCache;
      if (!cache) throw new EngineStartError('a model URL needs a model cache directory to fetch into');
      const file = await timed(phases, 'download', () => cache.file(source, (fraction) => report(fraction * 50, 'downloading the model file')),
        (fetched) => ({ detail: fetched.cacheHit ? `cache hit (${formatBytes(fetched.bytes)})` : `fetched ${formatBytes(fetched.bytes)}`, bytes: fetched.bytes }));
      this.modelPath = file.path;
      await LlamaRuntime.checkModelFile(file.path);
    } else {
      this.modelPath = this.options.modelPath;
    }
    const modelPath = this.modelPath as string;
    const startedAt = Date.now();
    const runtime = await timed(phases, 'load', () => LlamaRuntime.load(this.backend as LlamaBackend, {
      progress: (percent, stage) => report(100 - loadShare * 100 + percent * loadShare, stage),
      modelPath, threads: this.options.threads, contextSize: this.options.contextSize,
      defaultContextSize: DEFAULT_LLAMA_CONTEXT_SIZE, parallel: this.options.parallel, cachedSequences: this.options.cachedSequences,
      prefixCache: this.options.prefixCache,
    }), (loaded) => ({ detail: `context of ${loaded.contextSize} tokens × ${loaded.sequences.size} sequence(s), ${this.options.threads} thread(s)` }));
    const loadMs = Date.now() - startedAt;
    report(99, 'warming up');
    await timed(phases, 'warm_up', () => runtime.warmUp(), (prompt) => ({ detail: `1 token decoded after a ${prompt}-token prompt` }));
    this.runtime = runtime;
    this.logger.info({
      modelPath, contextSize: runtime.contextSize, parallel: this.options.parallel,
      cachedSequences: Math.max(this.options.parallel, this.options.cachedSequences ?? 0),
      threads: this.options.threads, chatFormat: runtime.chatFormat, loadMs, version: this.version,
    }, 'llama.cpp model loaded');
  }

  models(): readonly string[] {
    const file = this.options.modelPath ?? (this.options.modelSource ? new URL(this.options.modelSource.url).pathname : '');
    return [path.basename(file, '.gguf')];
  }

  health(): EngineHealthReport {
    return this.runtime ? HEALTHY : NOT_LOADED;
  }

  /** A read-only snapshot of the engine's load, cheap enough to read often; null until the model is loaded. */
  signals(): LlamaEngineSignals | null {
    return this.runtime?.signals() ?? null;
  }

  async run(job: EngineJob, sink: EngineSink, cancellation: JobCancellation): Promise<EngineResult> {
    const base = this.runtime;
    if (!base) throw new EngineFailure('engine_unavailable', 'the llama.cpp model is not loaded');
    if (!job.adapter) return await this.runOn(base, job, sink, cancellation);
    if (!this.loras) throw adapterLoadFailed('invalid', 'this replica serves no adapters (max_loras is 0)');
    const lease = await this.loras.acquire(job.adapter);
    const settled: { idle?: Promise<unknown> } = {};
    try {
      // The answer names the adapter as the client did.
      return await this.runOn(lease.handle.runtime, { ...job, model: job.adapter.displayName || job.adapter.name }, sink, cancellation, settled);
    } finally {
      // Its context may be evicted (disposed) only once its sequences are idle again.
      void (settled.idle ?? Promise.resolve()).then(() => lease.release());
    }
  }

  /** @param settled told when the sequences the job used are idle again (an adapter's context waits for it before it may go) */
  private async runOn(runtime: LlamaRuntime, job: EngineJob, sink: EngineSink, cancellation: JobCancellation, settled: { idle?: Promise<unknown> } = {}): Promise<EngineResult> {
    // In process, no engine is sent a name: the answers are written with the job's catalog model.
    const request = prepareEngineRequest(job, undefined);
    if (request.path === '/v1/embeddings') {
      this.embedder ??= new LlamaEmbedder(runtime.model, runtime.contextSize, this.options.threads);
      const answer = await this.embedder.embed(request.payload, job.embedding, job.model, cancellation.signal);
      await sink.output(answer.body, 'application/json');
      return { usage: answer.usage, finishReason: '', usageEstimated: false };
    }
    const plan = planLlamaRequest(request.payload, request.path);
    const choices = this.planChoices(runtime, plan, await this.grammarOf(plan));
    const promptTokens = plan.kind === 'chat' ? choices[0].promptTokens.length : sumPromptTokens(choices, plan.n);
    const progress: ChoiceProgress[] = choices.map(() => ({ tokens: 0, cachedTokens: 0 }));
    const usage = (): OpenAiUsage => {
      const completion = progress.reduce((sum, choice) => sum + choice.tokens, 0);
      return {
        prompt_tokens: promptTokens, completion_tokens: completion, total_tokens: promptTokens + completion,
        prompt_tokens_details: { cached_tokens: cachedPromptTokens(progress, plan.n) },
      };
    };
    // One signal for the whole request: the job's cancellation, or the first choice that fails.
    const failed = new AbortController();
    const signal = AbortSignal.any([cancellation.signal, failed.signal]);
    // Only the caller's tenant's prefixes: `cached_tokens` counts its own reuse alone.
    const sequences = await runtime.sequences.acquire(choices.length, signal, choices.map((choice) => choice.promptTokens), cacheTenantOf(job)).catch((error: unknown) => {
      throw failureOf(error, usage());
    });
    const idle: Array<Promise<unknown>> = [];
    const generate = (index: number, onText: (text: string) => Promise<void> | undefined) =>
      generateChoice(runtime, sequences[index], choices[index], progress[index], onText, signal, idle).catch((error: unknown) => {
        failed.abort(error);
        throw error;
      });
    try {
      if (plan.stream) return await streamChoices(plan, choices, job.includeUsage, sink, generate, usage);
      const results = await Promise.all(choices.map((_, index) => generate(index, () => undefined)));
      const body = completionBody(plan, results.map((result, index) => finishChoice(plan, { ...result, text: choices[index].echo + result.text })), usage());
      return await forwardJsonBody(body, sink, () => '');
    } catch (error) {
      throw failureOf(signal.aborted ? signal.reason : error, usage());
    } finally {
      settled.idle = Promise.all(idle).then(() => runtime.sequences.release(sequences));
      void settled.idle;
    }
  }

  async close(): Promise<void> {
    await this.loras?.close();
    const runtime = this.runtime;
    const embedder = this.embedder;
    this.runtime = null;
    this.embedder = null;
    await embedder?.close();
    await runtime?.close();
  }

  /** The grammar the answer is held to (JSON of a schema, tool calls), compiled once per schema. */
  private async grammarOf(plan: LlamaRequestPlan): Promise<LlamaGrammar | undefined> {
    const { output } = plan;
    if (output.kind === 'text' || !this.grammars) return undefined;
    const schema = output.kind === 'json' ? output.schema : output.tools.schema;
    return await this.grammars.grammarFor(schema, { orText: output.kind === 'tools' && output.tools.choice === 'auto' }).catch((error: Error) => {
      // The converter only lets through what the generator handles: reaching this is a gap there, said plainly.
      const param = output.kind === 'json' ? 'response_format.json_schema.schema' : 'tools';
      throw invalidRequestFailure(param, `llama.cpp could not build a grammar for this schema: ${error.message}`, 'unsupported_parameter');
    });
  }

  /** One choice per prompt and `n`, each with its token budget; a 400 when they cannot fit. */
  private planChoices(runtime: LlamaRuntime, plan: LlamaRequestPlan, grammar: LlamaGrammar | undefined): PlannedChoice[] {
    const rendered: Array<RenderedPrompt & { echo: string }> = plan.kind === 'chat'
      ? [{ ...runtime.renderChat(plan.messages), echo: '' }]
      : plan.prompts.map((prompt) => {
        const tokens = runtime.tokenizePrompt(prompt);
        const echo = !plan.echo ? '' : 'text' in prompt ? prompt.text : runtime.detokenize(tokens);
        return { tokens, stopTokens: new Set<Token>(), stopTexts: [], echo };
      });
    const total = rendered.length * plan.n;
    if (total > runtime.sequences.size) {
      throw invalidRequestFailure('n', `this llama-cpp replica decodes at most ${runtime.sequences.size} choices at once; asked for ${total}`);
    }
    const contextSize = runtime.contextSize;
    return rendered.flatMap((prompt, promptIndex) => {
      const param = plan.kind === 'chat' ? 'messages' : 'prompt';
      if (prompt.tokens.length === 0) throw invalidRequestFailure(param, `\`${param}\` must not be empty`);
      const maxTokens = plan.maxTokens ?? contextSize - prompt.tokens.length;
      if (prompt.tokens.length + maxTokens > contextSize || maxTokens < 1) {
        throw invalidRequestFailure(param,
          `This model's maximum context length is ${contextSize} tokens. However, you requested ${prompt.tokens.length + Math.max(1, maxTokens)} tokens ` +
          `(${prompt.tokens.length} in the ${plan.kind === 'chat' ? 'messages' : 'prompt'}, ${Math.max(1, maxTokens)} in the completion). ` +
          'Please reduce the length of the messages or completion.', 'context_length_exceeded');
      }
      return Array.from({ length: plan.n }, (_, choice) => ({
        promptTokens: prompt.tokens, maxTokens, sampling: plan.sampling, seed: choiceSeed(plan.sampling, promptIndex * plan.n + choice),
        stopTexts: [...plan.stop, ...prompt.stopTexts], stopTokens: prompt.stopTokens, echo: prompt.echo, grammar,
      }));
    });
  }
}

/** SSE chunks as tokens arrive: every choice's text, its finish, then usage and `[DONE]`. */
async function streamChoices(
  plan: LlamaRequestPlan, choices: readonly PlannedChoice[], includeUsage: boolean, sink: EngineSink,
  generate: (index: number, onText: (text: string) => Promise<void> | undefined) => Promise<ChoiceResult>, usage: () => OpenAiUsage,
): Promise<EngineResult> {
  const format = chunkFormat(plan);
  const forwarder = new StreamForwarder(sink, includeUsage, () => '');
  const send = (text: string) => (text ? forwarder.push(Buffer.from(text)) : undefined);
  await send(choices.map((choice, index) => format.start(index) + (choice.echo ? format.content(index, choice.echo) : '')).join(''));
  await Promise.all(choices.map(async (_, index) => {
    // With tools, an answer that is calls goes out as `delta.tool_calls` as it is generated.
    const calls = plan.output.kind === 'tools' ? new ToolCallStream({
      text: (text) => send(format.content(index, text)),
      callStart: (position, id, name) => send(format.toolCallStart(index, position, id, name)),
      callArguments: (position, text) => send(format.toolCallArguments(index, position, text)),
    }) : undefined;
    const result = await generate(index, (text) => (calls ? calls.push(text) : send(format.content(index, text))));
    // Cut by max_tokens, calls stay what was sent (as OpenAI's do); whole, they finish as `tool_calls`.
    await send(format.finish(index, calls?.isCalls && result.finishReason === 'stop' ? 'tool_calls' : result.finishReason));
  }));
  await send(format.usage(usage()) + DONE_EVENT);
  return await forwarder.finish();
}

/** Prompt tokens of a completions request: each prompt once, however many choices it has. */
function sumPromptTokens(choices: readonly PlannedChoice[], n: number): number {
  return choices.reduce((sum, choice, index) => (index % n === 0 ? sum + choice.promptTokens.length : sum), 0);
}

/**
 * Prompt tokens served from cache, counted like `prompt_tokens` (each prompt once, however
 * many choices it has): per prompt, the most any of its choices' sequences already held.
 */
function cachedPromptTokens(progress: readonly ChoiceProgress[], n: number): number {
  let cached = 0;
  for (let first = 0; first < progress.length; first += n) {
    cached += Math.max(...progress.slice(first, first + n).map((choice) => choice.cachedTokens));
  }
  return cached;
}

/** A failure with the request's usage so far: canceled and failed requests are still metered. */
function failureOf(error: unknown, usage: OpenAiUsage): EngineFailure {
  const cachedTokens = usage.prompt_tokens_details?.cached_tokens ?? 0;
  const metered: Usage = { promptTokens: usage.prompt_tokens, completionTokens: usage.completion_tokens, totalTokens: usage.total_tokens, ...(cachedTokens > 0 ? { cachedTokens } : {}) };
  if (error instanceof EngineFailure) {
    if (error.code === 'engine_rejected') return error;
    return new EngineFailure(error.code, error.message, { cause: error, usage: metered, engineStatus: error.engineStatus, engineBody: error.engineBody });
  }
  return new EngineFailure('engine_error', `llama.cpp failed: ${(error as Error)?.message ?? String(error)}`, { cause: error, usage: metered });
}
