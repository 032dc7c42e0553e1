/**
 * Deterministic text for the CPU engine: the same prompt, seed and choice index always give
 * the same pieces. Each piece is one token of `cpu-tokenizer` (a word with its leading space,
 * or a punctuation mark), so a stream's content chunks and its usage agree exactly.
 */
import { countTokens } from './cpu-tokenizer';
import { hashText, seededRandom } from './seeded-random';

const WORDS = [
  'the', 'model', 'serves', 'tokens', 'quickly', 'and', 'a', 'replica', 'answers', 'every', 'request',
  'with', 'care', 'while', 'agents', 'stream', 'bytes', 'to', 'clients', 'over', 'grpc', 'deployment',
  'scales', 'when', 'load', 'grows', 'so', 'latency', 'stays', 'low', 'for', 'users', 'who', 'wait',
  'on', 'results', 'from', 'engines', 'running', 'weights', 'in', 'memory', 'each', 'batch', 'holds',
  'many', 'prompts', 'that', 'share', 'cache', 'blocks', 'until', 'they', 'finish', 'cleanly',
];
const PUNCTUATION = [',', '.'];

export interface GenerationRequest {
  readonly promptText: string;
  readonly seed: number;
  readonly maxTokens: number;
  readonly stop: readonly string[];
  /** The choice's place in the answer (prompt i's choice j is i·n + j): part of its seed. */
  readonly choiceIndex: number;
}

export interface GeneratedAnswer {
  readonly text: string;
  readonly finishReason: 'stop' | 'length';
  readonly completionTokens: number;
}

/**
 * One choice's pieces, made as they are asked for: a stream holds a few numbers per choice,
 * never its whole answer (16 choices of 65,536 tokens were ~40 MB of strings per request when
 * they were made up front). The text ends right before the earliest occurrence of a stop
 * sequence in what `maxTokens` pieces would say; since a longer stop sequence that starts
 * earlier can end later than a shorter one, a piece is handed out only once no stop sequence
 * can start in it any more (at most the longest stop sequence's length of text is held back).
 */
export class ChoiceGenerator {
  finishReason: 'stop' | 'length' = 'length';
  /** Tokens handed out so far: the choice's completion tokens once `next` returned undefined. */
  completionTokens = 0;
  private readonly random: () => number;
  private readonly stops: readonly string[];
  private readonly longestStop: number;
  private made = 0;
  private previousWasWord = false;
  /** Pieces made but not handed out yet (only with stop sequences). */
  private readonly held: string[] = [];
  /** Offset in the whole text of `held[0]`. */
  private heldStart = 0;
  /** Length of the text made so far. */
  private textEnd = 0;
  /** The last `longestStop - 1` characters made: a stop sequence may start there and end in the next piece. */
  private recent = '';
  /** Offset of the earliest stop sequence found so far, or -1. */
  private cutAt = -1;
  private done = false;

  constructor(private readonly request: GenerationRequest) {
    this.random = seededRandom(hashText(`${request.seed}\u0000${request.choiceIndex}\u0000${request.promptText}`));
    this.stops = request.stop.filter((sequence) => sequence !== '');
    this.longestStop = this.stops.reduce((longest, sequence) => Math.max(longest, sequence.length), 0);
  }

  /** The next piece of the answer, or undefined once it is complete. */
  next(): string | undefined {
    if (this.done) return undefined;
    if (this.longestStop === 0) {
      if (this.made >= this.request.maxTokens) return this.end();
      this.completionTokens += 1;
      return this.makePiece();
    }
    while (true) {
      const complete = this.made >= this.request.maxTokens;
      const piece = this.held[0];
      if (piece === undefined) {
        if (complete) return this.end();
      } else if (complete || this.textEnd >= this.heldStart + piece.length + this.longestStop - 1) {
        // Every stop sequence that starts in this piece has been seen, and none starts before it.
        return this.handOut(piece);
      }
      this.makeHeldPiece();
    }
  }

  private handOut(piece: string): string | undefined {
    const start = this.heldStart;
    if (this.cutAt === -1 || this.cutAt >= start + piece.length) {
      this.held.shift();
      this.heldStart += piece.length;
      this.completionTokens += 1;
      return piece;
    }
    // The cut is in this piece: what comes before it is the last of the answer.
    this.finishReason = 'stop';
    const part = piece.slice(0, this.cutAt - start);
    // A piece cut down to its leading space carries no token.
    if (part.trim() === '') return this.end();
    this.done = true;
    this.held.length = 0;
    this.completionTokens += countTokens(part);
    return part;
  }

  private end(): undefined {
    this.done = true;
    this.held.length = 0;
    return undefined;
  }

  private makeHeldPiece(): void {
    const piece = this.makePiece();
    const windowStart = this.textEnd - this.recent.length;
    const window = this.recent + piece;
    for (const sequence of this.stops) {
      const at = window.indexOf(sequence);
      if (at !== -1 && (this.cutAt === -1 || windowStart + at < this.cutAt)) this.cutAt = windowStart + at;
    }
    this.recent = this.longestStop > 1 ? window.slice(-(this.longestStop - 1)) : '';
    this.held.push(piece);
    this.textEnd += piece.length;
  }

  private makePiece(): string {
    const index = this.made;
    this.made += 1;
    const roll = this.random();
    if (this.previousWasWord && roll < 0.12) {
      this.previousWasWord = false;
      return PUNCTUATION[roll < 0.07 ? 0 : 1];
    }
    const word = WORDS[Math.floor(this.random() * WORDS.length)];
    this.previousWasWord = true;
    return index === 0 ? word : ` ${word}`;
  }
}

/** Pieces joined this many at a time: a string per token would cost ~5 times the text's size until the end. */
const PIECES_PER_SEGMENT = 1_024;

/** Collects a choice's pieces for a whole (non-streamed) answer. */
export class AnswerText {
  private readonly segments: string[] = [];
  private pieces: string[] = [];

  add(piece: string): void {
    this.pieces.push(piece);
    if (this.pieces.length < PIECES_PER_SEGMENT) return;
    this.segments.push(this.pieces.join(''));
    this.pieces = [];
  }

  text(): string {
    return this.segments.join('') + this.pieces.join('');
  }
}

/** A whole choice at once, for a non-streamed answer (its text is in the body anyway). */
export function generateAnswer(request: GenerationRequest): GeneratedAnswer {
  const generator = new ChoiceGenerator(request);
  const text = new AnswerText();
  for (let piece = generator.next(); piece !== undefined; piece = generator.next()) text.add(piece);
  return { text: text.text(), finishReason: generator.finishReason, completionTokens: generator.completionTokens };
}
