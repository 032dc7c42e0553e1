/**
 * One GGUF model loaded with node-llama-cpp on the CPU: the model, one context whose
 * sequences are the parallel slots, and the chat wrapper that renders conversations with the
 * model's own template, on a `LlamaBackend` (llama.cpp itself, opened before the agent joins).
 */
import fs from 'node:fs';
import path from 'node:path';
import type { ChatHistoryItem, ChatWrapper, LlamaContext, LlamaContextSequence, LlamaGrammar, LlamaGrammarEvaluationState, LlamaModel, Token } from 'node-llama-cpp';
import { EngineStartError } from '../engines/engine-start-error';
import { firstLine, type LlamaBackend, type NodeLlamaCpp } from './llama-backend';
import type { ChatMessage, CompletionPrompt } from './llama-request';
import { invalidRequestFailure } from '../engines/request-fields';
import { commonPrefixLength, reusablePrefix, SequencePool } from './sequence-pool';

export interface LlamaRuntimeOptions {
  readonly modelPath: string;
  /** CPU threads of every evaluation. */
  readonly threads: number;
  /** Tokens per sequence; undefined = the smaller of `defaultContextSize` and the model's training context. */
  readonly contextSize?: number;
  readonly defaultContextSize: number;
  /** Sequences evaluated at once (parallel slots). */
  readonly parallel: number;
  /** Sequences of the context, each keeping its tokens for reuse; at least `parallel`. @default parallel */
  readonly cachedSequences?: number;
  /** How far loading is, 0–100, and the stage. */
  readonly progress?: (percent: number, stage: string) => void;
  /** Keep each sequence's tokens after a request and reuse the longest shared prefix. @default true */
  readonly prefixCache?: boolean;
}

/** Load signals of the runtime (see `LlamaCppEngine.signals`). */
export interface LlamaRuntimeSignals {
  readonly running: number;
  readonly waiting: number;
  readonly kvCacheUsage: number;
  readonly prefixCacheHitRate: number | null;
}

/** Prompt evaluations the hit rate is computed over (the most recent ones). */
const HIT_RATE_WINDOW = 1000;

export interface RenderedPrompt {
  readonly tokens: Token[];
  /** Tokens that end the answer besides the model's end-of-generation tokens (e.g. `<|im_end|>`). */
  readonly stopTokens: ReadonlySet<Token>;
  /** Text that ends the answer when the model spells it out (the template's turn markers). */
  readonly stopTexts: readonly string[];
}

export class LlamaRuntime {
  readonly sequences: SequencePool<LlamaContextSequence>;
  /**
   * Sequences whose KV cache may not be what a fresh evaluation of their tokens gives: a
   * context shift moved tokens (their keys were computed next to tokens now erased), or an
   * evaluation failed midway. They start their next request from an empty state.
   */
  private readonly untrusted = new WeakSet<LlamaContextSequence>();
  /** Prompt and reused tokens of the last `HIT_RATE_WINDOW` prompt evaluations. */
  private readonly recentPrompts: Array<{ tokens: number; cached: number }> = [];
  private recentPromptTokens = 0;
  private recentCachedTokens = 0;

  private constructor(
    private readonly library: NodeLlamaCpp,
    readonly model: LlamaModel,
    private readonly context: LlamaContext,
    private readonly chatWrapper: ChatWrapper,
    private readonly allSequences: readonly LlamaContextSequence[],
    parallel: number,
    private readonly prefixCache: boolean,
    /** `node-llama-cpp <version> (llama.cpp <release>)`. */
    readonly version: string,
    /** False for an adapter's runtime (withAdapter): it shares the base runtime's model and closes only its own context. */
    private readonly ownsModel = true,
  ) {
    this.sequences = new SequencePool(allSequences, (sequence) => this.cachedTokens(sequence), parallel, prefixCache && allSequences.every(canCopyPrefix));
  }

  /** Checks the model file is there before the agent joins (a missing file fails at once, clearly). */
  static async checkModelFile(modelPath: string): Promise<void> {
    const stat = await fs.promises.stat(modelPath).catch((error: NodeJS.ErrnoException) => {
      throw new EngineStartError(`model file ${modelPath} cannot be read: ${error.code === 'ENOENT' ? 'no such file' : error.message}`, { cause: error });
    });
    if (!stat.isFile()) throw new EngineStartError(`model file ${modelPath} is not a regular file`);
  }

  static async load(backend: LlamaBackend, options: LlamaRuntimeOptions): Promise<LlamaRuntime> {
    const { library, llama } = backend;
    const model = await llama.loadModel({
      modelPath: options.modelPath, gpuLayers: 0,
      // The weights are most of the start-up; the context after them is quick.
      onLoadProgress: (fraction) => options.progress?.(fraction * 95, 'loading the model weights'),
    }).catch(async (error: Error) => {
      throw new EngineStartError(`model file ${options.modelPath} is not a loadable GGUF model: ${(await backend.loadError()) || firstLine(error)}`, { cause: error });
    });
    const contextSize = options.contextSize ?? Math.min(options.defaultContextSize, model.trainContextSize);
    options.progress?.(95, 'creating the context');
    const sequenceCount = Math.max(options.parallel, options.cachedSequences ?? options.parallel);
    const context = await model.createContext({ contextSize, sequences: sequenceCount, threads: options.threads }).catch(async (error: Error) => {
      await model.dispose();
      throw new EngineStartError(`cannot create a ${contextSize}-token context with ${sequenceCount} sequence(s) for ${options.modelPath}: ${firstLine(error)}`, { cause: error });
    });
    return LlamaRuntime.around(library, model, context, chooseChatWrapper(library, model), sequenceCount, options.parallel, options.prefixCache ?? true, backend.version, true);
  }

  /**
   * A runtime of the same model whose context applies a LoRA adapter (GGUF, checked first by
   * llama-adapter-check.ts: llama.cpp aborts the process on some malformed adapters). node-llama-cpp
   * binds adapters to a context, so each adapter gets its own, with `parallel` sequences; the
   * base context is untouched. `close()` disposes the context and frees the adapter's weights.
   */
  async withAdapter(filePath: string, scale: number, threads: number): Promise<LlamaRuntime> {
    const context = await this.model.createContext({
      contextSize: this.context.contextSize, sequences: this.sequences.size, threads, lora: { adapters: [{ filePath, scale }] },
    });
    const runtime = LlamaRuntime.around(this.library, this.model, context, this.chatWrapper, this.sequences.size, this.sequences.size, this.prefixCache, this.version, false);
    runtime.adapterPath = filePath;
    return runtime;
  }

  /** The adapter file an adapter runtime applies; null for the base runtime. */
  adapterPath: string | null = null;

  /** Whether its context is disposed (an evicted adapter's runtime). */
  get disposed(): boolean {
    return this.context.disposed;
  }

  private static around(
    library: NodeLlamaCpp, model: LlamaModel, context: LlamaContext, chatWrapper: ChatWrapper, sequenceCount: number, parallel: number,
    prefixCache: boolean, version: string, ownsModel: boolean,
  ): LlamaRuntime {
    let runtime: LlamaRuntime | undefined;
    const sequences = Array.from({ length: sequenceCount }, () => context.getSequence({
      // node-llama-cpp's default ("eraseBeginning", keeping BOS), noting that the sequence's
      // cache no longer matches a fresh evaluation. Requests are planned to fit, so this is a guard.
      contextShift: {
        strategy: ({ sequence, size }) => {
          runtime?.untrusted.add(sequence);
          const start = model.tokens.bos !== null && sequence.contextTokens[0] === model.tokens.bos ? 1 : 0;
          return [{ start, end: start + size }];
        },
      },
    }));
    runtime = new LlamaRuntime(library, model, context, chatWrapper, sequences, parallel, prefixCache, version, ownsModel);
    return runtime;
  }

  /** Tokens each sequence holds (prompt and answer together). */
  get contextSize(): number {
    return this.context.contextSize;
  }

  /**
   * Readies a sequence for `prompt`: keeps the longest prefix of its tokens the prompt shares
   * (at least `MIN_REUSED_PREFIX`, never the whole prompt) and erases the rest. Returns how many
   * tokens were kept; `prompt.slice(kept)` is what remains to evaluate.
   *
   * node-llama-cpp's `evaluate()` appends to the sequence's state and reuses nothing by itself;
   * this is its own idiom (LlamaCompletion): `adaptStateToTokens(prefix, false)` erases the
   * tokens after the first difference, with no shifting (shifted keys are not what a fresh
   * evaluation computes). When llama.cpp cannot cut the cache there (sliding-window or
   * recurrent models) it empties the sequence instead, and `nextTokenIndex` says so.
   *
   * When the pool named a copy source (another free sequence holding a longer prefix, whose
   * tail is another conversation's history: sequence-pool.ts `PRESERVED_TAIL`), the prefix is
   * copied from it instead, and both histories survive.
   *
   * A sequence another tenant's request left (the pool's `reusableTokens`: none) is cleared
   * whatever it shares with the prompt: the request reuses only its own tenant's prefixes.
   */
  async prepareSequence(sequence: LlamaContextSequence, prompt: readonly Token[]): Promise<number> {
    let keep = reusablePrefix(this.sequences.reusableTokens(sequence), prompt);
    const source = this.sequences.sourceOf(sequence);
    this.untrusted.delete(sequence);
    try {
      const copy = source ? reusablePrefix(this.cachedTokens(source), prompt) : 0;
      if (source && copy > keep) keep = await copyPrefix(sequence, source, copy) ? copy : 0;
      else if (keep > 0) await sequence.adaptStateToTokens(prompt.slice(0, keep), false);
      if (keep === 0) await sequence.clearHistory();
    } finally {
      this.sequences.copied(sequence);
    }
    const kept = sequence.nextTokenIndex;
    // Never trust what was not checked: a state that is not a prefix of the prompt starts over.
    if (kept > keep || commonPrefixLength(sequence.contextTokens, prompt) < kept) {
      await sequence.clearHistory();
      this.sequences.prepared(sequence);
      this.recordPrompt(prompt.length, 0);
      return 0;
    }
    this.sequences.prepared(sequence);
    this.recordPrompt(prompt.length, kept);
    return kept;
  }

  /**
   * Decodes one token after a short prompt on a sequence, then clears it. llama.cpp allocates
   * its compute buffers and the threads' work on the first evaluation: done here, before the
   * replica takes work, a first request does not wait for it. Returns the prompt's length.
   */
  async warmUp(): Promise<number> {
    const sequence = this.allSequences[0];
    const prompt = this.tokenizePrompt({ text: 'Hello' });
    const evaluation = sequence.evaluate(prompt, { temperature: 0, yieldEogToken: true });
    try {
      await evaluation.next();
    } finally {
      await evaluation.return(undefined);
      await sequence.clearHistory();
    }
    return prompt.length;
  }

  /** The sequence's state is not to be reused (its evaluation failed midway). */
  distrust(sequence: LlamaContextSequence): void {
    this.untrusted.add(sequence);
  }

  /** Tokens a sequence holds that a new prompt may reuse: none when reuse is off or its state is not trusted. */
  cachedTokens(sequence: LlamaContextSequence): readonly Token[] {
    if (!this.prefixCache || this.untrusted.has(sequence) || sequence.disposed) return [];
    return sequence.contextTokens;
  }

  /** Sequences busy, requests waiting, KV use of the busy sequences and the recent prefix-cache hit rate. */
  signals(): LlamaRuntimeSignals {
    let held = 0;
    for (const sequence of this.allSequences) if (!sequence.disposed && !this.sequences.isFree(sequence)) held += sequence.nextTokenIndex;
    const capacity = this.context.contextSize * this.allSequences.length;
    return {
      running: this.sequences.busy,
      waiting: this.sequences.queued,
      kvCacheUsage: capacity > 0 ? Math.min(1, held / capacity) : 0,
      prefixCacheHitRate: this.recentPromptTokens > 0 ? this.recentCachedTokens / this.recentPromptTokens : null,
    };
  }

  private recordPrompt(tokens: number, cached: number): void {
    this.recentPrompts.push({ tokens, cached });
    this.recentPromptTokens += tokens;
    this.recentCachedTokens += cached;
    if (this.recentPrompts.length > HIT_RATE_WINDOW) {
      const oldest = this.recentPrompts.shift()!;
      this.recentPromptTokens -= oldest.tokens;
      this.recentCachedTokens -= oldest.cached;
    }
  }

  get chatFormat(): string {
    return this.chatWrapper.wrapperName;
  }

  /** Renders a conversation with the model's chat template, ending where the assistant's answer starts. */
  renderChat(messages: readonly ChatMessage[]): RenderedPrompt {
    const chatHistory: ChatHistoryItem[] = messages.map((message): ChatHistoryItem => (message.role === 'assistant'
      ? { type: 'model', response: [message.content] }
      : { type: message.role, text: message.content }));
    chatHistory.push({ type: 'model', response: [] });
    const state = this.chatWrapper.generateContextState({ chatHistory });
    const stopTokens = new Set<Token>();
    const stopTexts: string[] = [];
    for (const trigger of state.stopGenerationTriggers) {
      const tokens = trigger.tokenize(this.model.tokenizer);
      if (tokens.length === 1 && this.model.isSpecialToken(tokens[0])) {
        stopTokens.add(tokens[0]);
        continue;
      }
      const text = trigger.values.map((value) => (typeof value === 'string' ? value : value instanceof this.library.SpecialTokensText ? value.value : '')).join('');
      if (text) stopTexts.push(text);
    }
    return { tokens: state.contextText.tokenize(this.model.tokenizer), stopTokens, stopTexts };
  }

  /** A completion prompt as tokens: plain text (control-token spellings stay text), or ids checked against the vocabulary. */
  tokenizePrompt(prompt: CompletionPrompt): Token[] {
    if ('tokens' in prompt) {
      const vocabulary = this.model.fileInfo.metadata.tokenizer?.ggml?.tokens?.length ?? 0;
      if (prompt.tokens.some((token) => token >= vocabulary)) throw invalidRequestFailure('prompt', `token ids in \`prompt\` must be below the vocabulary size ${vocabulary}`);
      return prompt.tokens as Token[];
    }
    const tokens = this.model.tokenize(prompt.text, false);
    const bos = this.model.tokens.bos;
    return bos !== null && this.model.tokens.shouldPrependBosToken ? [bos, ...tokens] : tokens;
  }

  detokenize(tokens: readonly Token[], lastTokens?: readonly Token[]): string {
    return this.model.detokenize(tokens, false, lastTokens);
  }

  isEndOfGeneration(token: Token): boolean {
    return this.model.isEogToken(token);
  }

  /** Token bias for a request's `logit_bias` (values are added to the logits, as OpenAI does). */
  tokenBias(biases: ReadonlyMap<number, number>) {
    if (biases.size === 0) return undefined;
    const bias = new this.library.TokenBias(this.model.tokenizer);
    for (const [token, value] of biases) bias.set(token as Token, { logit: value });
    return bias;
  }

  /** A fresh evaluation state of `grammar`: one per choice, as it follows that choice's tokens. */
  grammarState(grammar: LlamaGrammar): LlamaGrammarEvaluationState {
    return new this.library.LlamaGrammarEvaluationState({ model: this.model, grammar });
  }

  async close(): Promise<void> {
    await this.context.dispose();
    if (this.ownsModel) await this.model.dispose();
    else if (this.adapterPath) await releaseLora(this.model, this.adapterPath);
  }
}

/** node-llama-cpp's own (internal) prefix copy between sequences of a context, used by its chat sessions. */
interface PrefixCopyingSequence {
  _copyStateFromOtherSequence(source: LlamaContextSequence, length: number): Promise<boolean>;
}

/**
 * Whether this node-llama-cpp copies a prefix between sequences: llama.cpp's `seq_cp` (the
 * cells are shared, not recomputed), exposed by node-llama-cpp 3.x as an internal method of a
 * sequence. Feature-tested, so a version without it only loses the copy (sequence-pool.ts
 * then lets a prompt take the sequence that holds its prefix, as before).
 */
function canCopyPrefix(sequence: LlamaContextSequence): boolean {
  return typeof (sequence as unknown as Partial<PrefixCopyingSequence>)._copyStateFromOtherSequence === 'function';
}

/**
 * Makes `target` hold the first `length` tokens of `source` (whose KV cells llama.cpp then
 * shares). False when it could not: the target's state is then unknown and is cleared.
 */
async function copyPrefix(target: LlamaContextSequence, source: LlamaContextSequence, length: number): Promise<boolean> {
  const copied = await (target as unknown as PrefixCopyingSequence)._copyStateFromOtherSequence(source, length).catch(() => false);
  return copied && target.nextTokenIndex === length;
}

/**
 * node-llama-cpp reads `tokenizer.chat_template` and uses an equivalent built-in wrapper, or
 * runs the Jinja template itself. Without a template it falls back to a plain
 * "### Human / ### Assistant" format; a vocabulary with ChatML's control tokens (Qwen-style
 * base models ship none) is better served by ChatML.
 */
function chooseChatWrapper(library: NodeLlamaCpp, model: LlamaModel): ChatWrapper {
  const resolved = library.resolveChatWrapper(model, { warningLogs: false });
  if (!(resolved instanceof library.GeneralChatWrapper)) return resolved;
  const isControl = (text: string) => {
    const tokens = model.tokenize(text, true);
    return tokens.length === 1 && model.isSpecialToken(tokens[0]);
  };
  return isControl('<|im_start|>') && isControl('<|im_end|>') ? new library.ChatMLChatWrapper() : resolved;
}


/** node-llama-cpp's (internal) adapters of a model, by resolved path, each counting the contexts that applied it. */
interface LoraHoldingModel {
  _loraAdapters?: Map<string, { usages: number; dispose(): Promise<void> }>;
}

/**
 * Frees an adapter's weights once no context applies it. node-llama-cpp keeps every adapter a
 * context loaded until the model is disposed (its own contexts never let go of them), so an
 * evicted adapter would stay in memory for the agent's lifetime. Feature-tested: a version
 * without the internal map only keeps the weights, as it always did.
 */
async function releaseLora(model: LlamaModel, filePath: string): Promise<void> {
  const adapters = (model as unknown as LoraHoldingModel)._loraAdapters;
  if (!(adapters instanceof Map)) return;
  const resolved = path.resolve(process.cwd(), filePath);
  const lora = adapters.get(resolved);
  if (!lora) return;
  lora.usages = Math.max(0, lora.usages - 1);
  if (lora.usages > 0) return;
  adapters.delete(resolved);
  await lora.dispose();
}

/** Adapters the model holds in memory now (tests and the bench watch evictions free them); null when this node-llama-cpp does not say. */
export function loadedLoraCount(model: LlamaModel): number | null {
  const adapters = (model as unknown as LoraHoldingModel)._loraAdapters;
  return adapters instanceof Map ? adapters.size : null;
}
