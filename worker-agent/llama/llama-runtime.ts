/**
 * One GGUF model loaded with node-llama-cpp on the CPU: the model, one context whose
 * sequences are the parallel slots, and the chat wrapper that renders conversations with the
 * model's own template, on a `LlamaBackend` (llama.cpp itself, opened before the agent joins).
 */
import fs from 'node:fs';
import type { ChatHistoryItem, ChatWrapper, LlamaContext, LlamaContextSequence, LlamaModel, Token } from 'node-llama-cpp';
import { EngineStartError } from '../engines/engine-start-error';
import { firstLine, type LlamaBackend, type NodeLlamaCpp } from './llama-backend';
import type { ChatMessage, CompletionPrompt } from './llama-request';
import { invalidRequestFailure } from '../engines/request-fields';
import { SequencePool } from './sequence-pool';

export interface LlamaRuntimeOptions {
  readonly modelPath: string;
  /** CPU threads of every evaluation. */
  readonly threads: number;
  /** Tokens per sequence; undefined = the smaller of `defaultContextSize` and the model's training context. */
  readonly contextSize?: number;
  readonly defaultContextSize: number;
  /** Sequences (parallel slots) of the context. */
  readonly parallel: number;
  /** How far loading is, 0–100, and the stage. */
  readonly progress?: (percent: number, stage: string) => void;
}

export interface RenderedPrompt {
  readonly tokens: Token[];
  /** Tokens that end the answer besides the model's end-of-generation tokens (e.g. `<|im_end|>`). */
  readonly stopTokens: ReadonlySet<Token>;
  /** Text that ends the answer when the model spells it out (the template's turn markers). */
  readonly stopTexts: readonly string[];
}

export class LlamaRuntime {
  private constructor(
    private readonly library: NodeLlamaCpp,
    readonly model: LlamaModel,
    private readonly context: LlamaContext,
    private readonly chatWrapper: ChatWrapper,
    readonly sequences: SequencePool<LlamaContextSequence>,
    /** `node-llama-cpp <version> (llama.cpp <release>)`. */
    readonly version: string,
  ) {}

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
    const context = await model.createContext({ contextSize, sequences: options.parallel, threads: options.threads }).catch(async (error: Error) => {
      await model.dispose();
      throw new EngineStartError(`cannot create a ${contextSize}-token context with ${options.parallel} sequence(s) for ${options.modelPath}: ${firstLine(error)}`, { cause: error });
    });
    const sequences = Array.from({ length: options.parallel }, () => context.getSequence());
    return new LlamaRuntime(library, model, context, chooseChatWrapper(library, model), new SequencePool(sequences), backend.version);
  }

  /** Tokens each sequence holds (prompt and answer together). */
  get contextSize(): number {
    return this.context.contextSize;
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

  async close(): Promise<void> {
    await this.context.dispose();
    await this.model.dispose();
  }
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

