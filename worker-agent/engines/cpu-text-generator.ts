/**
 * Deterministic text for the CPU engine: the same prompt, seed and choice index always give
 * the same pieces. Each piece is one token of `cpu-tokenizer` (a word with its leading space,
 * or a punctuation mark), so a stream's content chunks and its usage agree exactly.
 */
import { countTokens } from './cpu-tokenizer';
import { COMMA_PROBABILITY, FULL_STOP_PROBABILITY, PUNCTUATION_PROBABILITY, wordProbability, type PieceOdds } from './cpu-logprobs';
import { hashText, seededRandom } from '../../common/seeded-random';

export const WORDS: readonly string[] = [
  'the', 'model', 'serves', 'tokens', 'quickly', 'and', 'a', 'replica', 'answers', 'every', 'request',
  'with', 'care', 'while', 'agents', 'stream', 'bytes', 'to', 'clients', 'over', 'grpc', 'deployment',
  'scales', 'when', 'load', 'grows', 'so', 'latency', 'stays', 'low', 'for', 'users', 'who', 'wait',
  'on', 'results', 'from', 'engines', 'running', 'weights', 'in', 'memory', 'each', 'batch', 'holds',
  'many', 'prompts', 'that', 'share', 'cache', 'blocks', 'until', 'they', 'finish', 'cleanly',
];
const PUNCTUATION = [',', '.'];
/** Sentence mode: a sentence of 6 to 12 pieces before its full stop. */
const SENTENCE_WORDS_MIN = 6;
const SENTENCE_WORDS_SPREAD = 7;

export interface GenerationRequest {
  readonly promptText: string;
  readonly seed: number;
  readonly maxTokens: number;
  readonly stop: readonly string[];
  /** The choice's place in the answer (prompt i's choice j is i·n + j): part of its seed. */
  readonly choiceIndex: number;
  /** Keep each piece's odds (`logprobs`): `oddsOfLast` then describes the piece `next` returned. */
  readonly withOdds?: boolean;
  /**
   * End at the first full stop, finish_reason "stop", as a model ends its turn: the text answer of
   * a request with tools (an agent's final answer), where "length" would fail the clients' helpers.
   */
  readonly sentence?: boolean;
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
  /** With `withOdds`: the odds of each piece made but not handed out, in step with `held` (or the last one made). */
  private readonly heldOdds: PieceOdds[] = [];
  /** With `withOdds`: the odds of the piece `next` returned last. */
  oddsOfLast: PieceOdds | undefined;

  constructor(private readonly request: GenerationRequest) {
    this.random = seededRandom(hashText(`${request.seed}\u0000${request.choiceIndex}\u0000${request.promptText}`));
    this.stops = request.stop.filter((sequence) => sequence !== '');
    this.longestStop = this.stops.reduce((longest, sequence) => Math.max(longest, sequence.length), 0);
    // Drawn from its own stream, so the words of a sentence are those of the same request without it.
    if (request.sentence) this.sentenceEnd = SENTENCE_WORDS_MIN + Math.floor(seededRandom(hashText(`sentence\u0000${request.seed}\u0000${request.promptText}`))() * SENTENCE_WORDS_SPREAD);
  }

  /** The next piece of the answer, or undefined once it is complete. */
  next(): string | undefined {
    if (this.done) return undefined;
    if (this.longestStop === 0) {
      if (this.made >= this.request.maxTokens || this.sentenceEnded()) return this.end();
      this.completionTokens += 1;
      const piece = this.makePiece();
      if (this.request.withOdds) this.oddsOfLast = this.heldOdds.pop();
      return piece;
    }
    while (true) {
      const complete = this.made >= this.request.maxTokens || this.sentenceEnded();
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
    if (this.request.withOdds) this.oddsOfLast = this.heldOdds.shift();
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
    if (this.request.sentence && this.lastMade === '.') this.finishReason = 'stop';
    return undefined;
  }

  /** Sentence mode: the last piece made was a full stop, the answer's end. */
  private sentenceEnded(): boolean {
    return this.request.sentence === true && this.lastMade === '.';
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

  private lastMade = '';
  /** Sentence mode: the piece at this index is the full stop, unless one came earlier. */
  private sentenceEnd = Infinity;

  private makePiece(): string {
    const index = this.made;
    this.made += 1;
    if (index === this.sentenceEnd) {
      if (this.request.withOdds) this.heldOdds.push({ probability: 1, afterWord: true, first: false, forced: true });
      this.lastMade = PUNCTUATION[1];
      return this.lastMade;
    }
    const roll = this.random();
    const afterWord = this.previousWasWord;
    if (afterWord && roll < PUNCTUATION_PROBABILITY) {
      this.previousWasWord = false;
      const comma = roll < COMMA_PROBABILITY;
      if (this.request.withOdds) this.heldOdds.push({ probability: comma ? COMMA_PROBABILITY : FULL_STOP_PROBABILITY, afterWord, first: index === 0 });
      this.lastMade = PUNCTUATION[comma ? 0 : 1];
      return this.lastMade;
    }
    const word = WORDS[Math.floor(this.random() * WORDS.length)];
    this.previousWasWord = true;
    if (this.request.withOdds) this.heldOdds.push({ probability: wordProbability(afterWord, WORDS.length), afterWord, first: index === 0 });
    this.lastMade = index === 0 ? word : ` ${word}`;
    return this.lastMade;
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
