/**
 * One choice of a CPU engine answer, made a step (a token) at a time: words (text), a fixed
 * JSON text, or tool calls. The stream path asks each step's SSE events; the whole-body path
 * advances to the end and takes the answer. Either way usage counts the tokens handed out.
 */
import type { ChoiceAnswer, ChoiceRequest } from './cpu-choice-request';
import { tokenLogprob, type TokenLogprob } from './cpu-logprobs';
import type { ChunkFormat } from './cpu-response-format';
import type { PlannedToolCall } from './cpu-structured-answer';
import { AnswerText, ChoiceGenerator, WORDS } from './cpu-text-generator';
import { countTokens, tokenPieces } from './cpu-tokenizer';

export type { ChoiceAnswer, ChoiceRequest };

export interface CpuChoice {
  readonly finishReason: string;
  readonly completionTokens: number;
  /** The first event of the choice (chat: its role). */
  opening(format: ChunkFormat, index: number): string;
  /** The events of the next token, or undefined once the choice is complete (its finish event is the caller's). */
  nextEvents(format: ChunkFormat, index: number): string | undefined;
  /** Makes the next token for a whole answer; false once complete. */
  advance(): boolean;
  /** The whole answer, once `advance` returned false. */
  answer(): ChoiceAnswer;
}

export function cpuChoice(request: ChoiceRequest): CpuChoice {
  if (request.structured?.kind === 'tool_calls') return new ToolCallChoice(request.structured.calls, request.maxTokens);
  if (request.structured?.kind === 'json') return new FixedTextChoice(request.structured.text, request.maxTokens, request.stop);
  return new WordChoice(request);
}

class WordChoice implements CpuChoice {
  private readonly generator: ChoiceGenerator;
  private readonly text = new AnswerText();
  private readonly logprobs: TokenLogprob[] | undefined;

  constructor(private readonly request: ChoiceRequest) {
    this.generator = new ChoiceGenerator({ ...request, withOdds: request.topLogprobs !== null });
    this.logprobs = request.topLogprobs === null ? undefined : [];
  }

  get finishReason() { return this.generator.finishReason; }
  get completionTokens() { return this.generator.completionTokens; }

  opening(format: ChunkFormat, index: number): string {
    return format.role(index, false);
  }

  nextEvents(format: ChunkFormat, index: number): string | undefined {
    const piece = this.generator.next();
    if (piece === undefined) return undefined;
    return format.content(index, piece, this.logprobs ? JSON.stringify({ content: [this.logprobOf(piece)], refusal: null }) : undefined);
  }

  advance(): boolean {
    const piece = this.generator.next();
    if (piece === undefined) return false;
    this.text.add(piece);
    this.logprobs?.push(this.logprobOf(piece));
    return true;
  }

  answer(): ChoiceAnswer {
    return { text: this.text.text(), finishReason: this.finishReason, completionTokens: this.completionTokens, ...(this.logprobs ? { logprobs: this.logprobs } : {}) };
  }

  private logprobOf(piece: string): TokenLogprob {
    return tokenLogprob(piece, this.generator.oddsOfLast!, this.request.topLogprobs ?? 0, WORDS);
  }
}

/** A JSON answer handed out a token at a time; cut by max_tokens ("length") or a stop sequence ("stop"). */
class FixedTextChoice implements CpuChoice {
  finishReason = 'stop';
  completionTokens = 0;
  private readonly pieces: string[];
  private handedOut = '';

  constructor(text: string, maxTokens: number, stops: readonly string[]) {
    const cut = stops.filter((stop) => stop !== '').reduce((end, stop) => {
      const at = text.indexOf(stop);
      return at === -1 ? end : Math.min(end, at);
    }, text.length);
    const pieces = tokenPieces(text.slice(0, cut)).filter((piece) => countTokens(piece) > 0);
    this.pieces = pieces.length > maxTokens ? pieces.slice(0, maxTokens) : pieces;
    if (pieces.length > maxTokens) this.finishReason = 'length';
  }

  opening(format: ChunkFormat, index: number): string {
    return format.role(index, false);
  }

  nextEvents(format: ChunkFormat, index: number): string | undefined {
    const piece = this.take();
    return piece === undefined ? undefined : format.content(index, piece);
  }

  advance(): boolean {
    const piece = this.take();
    if (piece !== undefined) this.handedOut += piece;
    return piece !== undefined;
  }

  answer(): ChoiceAnswer {
    return { text: this.handedOut, finishReason: this.finishReason, completionTokens: this.completionTokens };
  }

  private take(): string | undefined {
    if (this.completionTokens >= this.pieces.length) return undefined;
    return this.pieces[this.completionTokens++];
  }
}

/**
 * Tool calls, streamed as OpenAI does: per call a first delta with its index, id, type, name
 * and empty arguments, then the arguments a token at a time. The name's tokens count as
 * completion tokens; max_tokens cuts the arguments ("length"), else the finish is "tool_calls".
 */
class ToolCallChoice implements CpuChoice {
  finishReason = 'tool_calls';
  completionTokens = 0;
  private readonly steps: { call: number; piece?: string; tokens: number }[] = [];
  private step = 0;
  private readonly made: { id: string; name: string; arguments: string }[] = [];

  constructor(private readonly calls: readonly PlannedToolCall[], maxTokens: number) {
    let budget = maxTokens;
    let cut = false;
    for (const [call, planned] of this.calls.entries()) {
      const nameTokens = Math.max(1, countTokens(planned.name));
      if (nameTokens > budget) cut = true;
      else {
        this.steps.push({ call, tokens: nameTokens });
        budget -= nameTokens;
        for (const piece of tokenPieces(planned.arguments)) {
          if (budget === 0) {
            cut = true;
            break;
          }
          this.steps.push({ call, piece, tokens: 1 });
          budget -= 1;
        }
      }
      if (cut) break;
    }
    if (cut) this.finishReason = 'length';
  }

  opening(format: ChunkFormat, index: number): string {
    return format.role(index, true);
  }

  nextEvents(format: ChunkFormat, index: number): string | undefined {
    const step = this.take();
    if (step === undefined) return undefined;
    const planned = this.calls[step.call];
    return step.piece === undefined ? format.toolCallStart(index, step.call, planned.id, planned.name) : format.toolCallArguments(index, step.call, step.piece);
  }

  advance(): boolean {
    return this.take() !== undefined;
  }

  answer(): ChoiceAnswer {
    return { text: null, finishReason: this.finishReason, completionTokens: this.completionTokens, toolCalls: this.made };
  }

  private take(): { call: number; piece?: string; tokens: number } | undefined {
    const step = this.steps[this.step];
    if (step === undefined) return undefined;
    this.step += 1;
    this.completionTokens += step.tokens;
    if (step.piece === undefined) this.made.push({ id: this.calls[step.call].id, name: this.calls[step.call].name, arguments: '' });
    else this.made[this.made.length - 1].arguments += step.piece;
    return step;
  }
}
