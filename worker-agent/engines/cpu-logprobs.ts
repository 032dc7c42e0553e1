/**
 * Log probabilities of the CPU engine's own tokens: the probabilities its seeded generator
 * (cpu-text-generator.ts) gave them, so `logprobs` is answered with real numbers rather than
 * refused. After a word, a comma comes with probability 0.07 and a full stop with 0.05; a word
 * is otherwise drawn uniformly from the vocabulary.
 */
export interface PieceOdds {
  /** The probability the generator gave the piece it made. */
  readonly probability: number;
  /** Punctuation could follow (the previous piece was a word). */
  readonly afterWord: boolean;
  /** The first piece of the answer: its words carry no leading space. */
  readonly first: boolean;
  /** The only piece possible here (a sentence's closing full stop). */
  readonly forced?: boolean;
}

export interface TokenLogprob {
  token: string;
  logprob: number;
  bytes: number[];
  top_logprobs: { token: string; logprob: number; bytes: number[] }[];
}

export const COMMA_PROBABILITY = 0.07;
export const FULL_STOP_PROBABILITY = 0.05;
export const PUNCTUATION_PROBABILITY = COMMA_PROBABILITY + FULL_STOP_PROBABILITY;

export function wordProbability(afterWord: boolean, vocabularySize: number): number {
  return (afterWord ? 1 - PUNCTUATION_PROBABILITY : 1) / vocabularySize;
}

/** OpenAI's `logprobs.content[]` entry of a piece, with the `top` most likely pieces at its place. */
export function tokenLogprob(piece: string, odds: PieceOdds, top: number, vocabulary: readonly string[]): TokenLogprob {
  return { token: piece, logprob: Math.log(odds.probability), bytes: bytesOf(piece), top_logprobs: top > 0 ? alternatives(odds, top, vocabulary) : [] };
}

function alternatives(odds: PieceOdds, top: number, vocabulary: readonly string[]): TokenLogprob['top_logprobs'] {
  const choices: { token: string; probability: number }[] = [];
  if (odds.forced) return [{ token: '.', logprob: 0, bytes: bytesOf('.') }];
  if (odds.afterWord) choices.push({ token: ',', probability: COMMA_PROBABILITY }, { token: '.', probability: FULL_STOP_PROBABILITY });
  const word = wordProbability(odds.afterWord, vocabulary.length);
  // Words tie; they are listed in vocabulary order, after the likelier punctuation.
  for (const entry of vocabulary) {
    if (choices.length >= top) break;
    choices.push({ token: odds.first ? entry : ` ${entry}`, probability: word });
  }
  return choices.slice(0, top).map(({ token, probability }) => ({ token, logprob: Math.log(probability), bytes: bytesOf(token) }));
}

function bytesOf(token: string): number[] {
  return [...Buffer.from(token, 'utf8')];
}
