/**
 * Generates one choice on one context sequence, token by token: sampling as the request
 * asked, text decoded as soon as it is whole UTF-8, stop sequences held back and cut, and
 * every sampled token counted (the usage is what the model actually computed).
 */
import type { LlamaContextSequence, LlamaGrammar, Token } from 'node-llama-cpp';
import type { LlamaRuntime } from './llama-runtime';
import type { SamplingSettings } from './llama-request';
import { StopMatcher } from './stop-matcher';

/** Longest UTF-8 sequence; a byte-level vocabulary may split one character over this many tokens. */
const MAX_UTF8_BYTES = 4;
/** Context for detokenising the next piece (SentencePiece drops a leading space without it). */
const DETOKENIZE_CONTEXT = 8;

export interface ChoiceRequest {
  readonly promptTokens: Token[];
  readonly maxTokens: number;
  readonly seed: number;
  readonly sampling: SamplingSettings;
  /** The request's stop sequences plus the chat template's textual turn markers. */
  readonly stopTexts: readonly string[];
  readonly stopTokens: ReadonlySet<Token>;
  /**
   * Sampling is held to this grammar (llama-grammar.ts): once it is complete only
   * end-of-generation may follow, so the answer stops there ("stop").
   */
  readonly grammar?: LlamaGrammar;
}

export interface ChoiceProgress {
  /** Tokens sampled so far (the choice's completion tokens, even if it is aborted). */
  tokens: number;
  /** Leading prompt tokens the sequence already held and were not evaluated again. */
  cachedTokens: number;
}

export interface ChoiceResult {
  readonly text: string;
  readonly finishReason: 'stop' | 'length';
}

/**
 * Resolves when the choice is finished; rejects with the signal's reason as soon as it aborts.
 * `idle` gets a promise (at once) that resolves when the sequence may be used again, which
 * after an abort is once llama.cpp has finished the step it was computing.
 */
export async function generateChoice(
  runtime: LlamaRuntime, sequence: LlamaContextSequence, request: ChoiceRequest, progress: ChoiceProgress,
  onText: (text: string) => Promise<void> | undefined, signal: AbortSignal, idle: Array<Promise<unknown>>,
): Promise<ChoiceResult> {
  let markIdle = () => {};
  idle.push(new Promise<void>((resolve) => { markIdle = resolve; }));
  let iterator: AsyncGenerator<Token, void, void | Token | Token[]> | undefined;
  try {
    // The sequence keeps what it shares with the prompt from an earlier request; only the rest is evaluated.
    progress.cachedTokens = await runtime.prepareSequence(sequence, request.promptTokens);
    signal.throwIfAborted();
    const generated: Token[] = [];
    iterator = startEvaluation(runtime, sequence, request, request.promptTokens.slice(progress.cachedTokens), generated);
    return await generateTokens(runtime, iterator, request, generated, progress, onText, signal);
  } catch (error) {
    // An abort waits for the step being computed (below), which leaves the state whole; a failure may not.
    if (!signal.aborted) runtime.distrust(sequence);
    throw error;
  } finally {
    // Returning the generator waits for the step llama.cpp is computing; the caller does not.
    if (iterator) void iterator.return(undefined).catch(() => undefined).then(markIdle);
    else markIdle();
  }
}

/**
 * Evaluates the prompt's `uncached` tail (the sequence holds the rest) and starts sampling;
 * the penalties read the answer so far from `generated`.
 */
function startEvaluation(runtime: LlamaRuntime, sequence: LlamaContextSequence, request: ChoiceRequest, uncached: Token[], generated: readonly Token[]) {
  const { sampling } = request;
  const penalised = sampling.presencePenalty !== 0 || sampling.frequencyPenalty !== 0 || sampling.repetitionPenalty !== 1;
  return sequence.evaluate(uncached, {
    temperature: sampling.temperature, topP: sampling.topP, topK: sampling.topK, minP: sampling.minP, seed: request.seed,
    // OpenAI's penalties count the answer so far (vLLM does the same); llama.cpp applies
    // presence and frequency exactly as OpenAI defines them.
    repeatPenalty: penalised ? {
      punishTokens: () => generated as Token[], maxPunishTokens: request.maxTokens,
      penalty: sampling.repetitionPenalty, presencePenalty: sampling.presencePenalty, frequencyPenalty: sampling.frequencyPenalty,
    } : undefined,
    tokenBias: runtime.tokenBias(sampling.logitBias),
    grammarEvaluationState: request.grammar ? runtime.grammarState(request.grammar) : undefined,
    yieldEogToken: true,
  });
}

/** Reads tokens until a stop token, a stop sequence or the token budget; every token is counted. */
async function generateTokens(
  runtime: LlamaRuntime, iterator: AsyncGenerator<Token, void, void | Token | Token[]>, request: ChoiceRequest, generated: Token[],
  progress: ChoiceProgress, onText: (text: string) => Promise<void> | undefined, signal: AbortSignal,
): Promise<ChoiceResult> {
  const matcher = new StopMatcher(request.stopTexts);
  let text = '';
  let pending: Token[] = [];
  let context: Token[] = [];
  const emit = async (piece: string) => {
    if (!piece) return;
    text += piece;
    await onText(piece);
  };
  /** Moves the pending tokens into the detokenising context; `piece` is their text. */
  const takePending = (piece = runtime.detokenize(pending, context)) => {
    context = [...context, ...pending].slice(-DETOKENIZE_CONTEXT);
    pending = [];
    return piece;
  };
  let next = nextToken(iterator);
  while (true) {
    const step = await abortable(next, signal);
    // The sequence is full: cannot happen within the planned budget, but end cleanly if it does.
    if (step.done) break;
    const token = step.value;
    progress.tokens += 1;
    generated.push(token);
    if (runtime.isEndOfGeneration(token) || request.stopTokens.has(token)) {
      await emit(matcher.push(takePending()).text + matcher.flush());
      return { text, finishReason: 'stop' };
    }
    pending.push(token);
    let piece = runtime.detokenize(pending, context);
    let stopped = false;
    // An incomplete UTF-8 character decodes to U+FFFD: wait for the tokens that complete it.
    if (piece.endsWith('\uFFFD') && pending.length < MAX_UTF8_BYTES) {
      piece = '';
    } else {
      const match = matcher.push(takePending(piece));
      piece = match.text;
      stopped = match.stopped;
    }
    const more = !stopped && progress.tokens < request.maxTokens;
    // Everything that decides whether to go on is known: llama.cpp computes the next token
    // while this one travels to the client (the penalties already see it in `generated`).
    if (more) next = nextToken(iterator);
    await emit(piece);
    if (stopped) return { text, finishReason: 'stop' };
    if (!more) break;
  }
  await emit(matcher.push(takePending()).text + matcher.flush());
  return { text, finishReason: 'length' };
}

/** Asks for the next token; a failure is seen when the step is awaited (or not at all, if the choice ended first). */
function nextToken(iterator: AsyncGenerator<Token, void, void | Token | Token[]>): Promise<IteratorResult<Token, void>> {
  const next = iterator.next();
  next.catch(() => undefined);
  return next;
}

/** `promise`, or the signal's reason as soon as it aborts (the step itself keeps running). */
function abortable<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(
      (value) => { signal.removeEventListener('abort', onAbort); resolve(value); },
      (error) => { signal.removeEventListener('abort', onAbort); reject(error); },
    );
  });
}
