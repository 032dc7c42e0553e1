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

export interface GeneratedChoice {
  /** Content deltas in order; their concatenation is `text`. */
  readonly pieces: readonly string[];
  readonly text: string;
  readonly finishReason: 'stop' | 'length';
  readonly completionTokens: number;
}

export interface GenerationRequest {
  readonly promptText: string;
  readonly seed: number;
  readonly maxTokens: number;
  readonly stop: readonly string[];
}

export function generateChoice(request: GenerationRequest, choiceIndex: number): GeneratedChoice {
  const random = seededRandom(hashText(`${request.seed}\u0000${choiceIndex}\u0000${request.promptText}`));
  const pieces: string[] = [];
  let previousWasWord = false;
  for (let index = 0; index < request.maxTokens; index += 1) {
    const roll = random();
    if (previousWasWord && roll < 0.12) {
      pieces.push(PUNCTUATION[roll < 0.07 ? 0 : 1]);
      previousWasWord = false;
    } else {
      const word = WORDS[Math.floor(random() * WORDS.length)];
      pieces.push(index === 0 ? word : ` ${word}`);
      previousWasWord = true;
    }
  }
  return applyStop(pieces, request.stop);
}

/** Cuts the text before the earliest stop sequence, as OpenAI engines do. */
function applyStop(pieces: string[], stop: readonly string[]): GeneratedChoice {
  const fullText = pieces.join('');
  let cutAt = -1;
  for (const sequence of stop) {
    const at = sequence === '' ? -1 : fullText.indexOf(sequence);
    if (at !== -1 && (cutAt === -1 || at < cutAt)) cutAt = at;
  }
  if (cutAt === -1) return { pieces, text: fullText, finishReason: 'length', completionTokens: pieces.length };
  const kept: string[] = [];
  let length = 0;
  for (const piece of pieces) {
    if (length >= cutAt) break;
    const part = piece.slice(0, cutAt - length);
    length += piece.length;
    // A piece cut down to its leading space carries no token.
    if (part.trim() !== '') kept.push(part);
  }
  const text = kept.join('');
  return { pieces: kept, text, finishReason: 'stop', completionTokens: countTokens(text) };
}
