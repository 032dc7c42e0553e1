/**
 * The CPU engine makes each choice's text as it is sent (cpu-text-generator.ts) instead of up
 * front. Its answers must be exactly what the up-front generator said, pieces included (a
 * stream's chunks are one token each), stop sequences with their "earliest occurrence in the
 * whole text" rule included: the reference below is that generator, kept as it was.
 */
import fc from 'fast-check';
import { countTokens } from '../../worker-agent/engines/cpu-tokenizer';
import { ChoiceGenerator, generateAnswer, type GenerationRequest } from '../../worker-agent/engines/cpu-text-generator';
import { hashText, seededRandom } from '../../common/seeded-random';

const WORDS = [
  'the', 'model', 'serves', 'tokens', 'quickly', 'and', 'a', 'replica', 'answers', 'every', 'request',
  'with', 'care', 'while', 'agents', 'stream', 'bytes', 'to', 'clients', 'over', 'grpc', 'deployment',
  'scales', 'when', 'load', 'grows', 'so', 'latency', 'stays', 'low', 'for', 'users', 'who', 'wait',
  'on', 'results', 'from', 'engines', 'running', 'weights', 'in', 'memory', 'each', 'batch', 'holds',
  'many', 'prompts', 'that', 'share', 'cache', 'blocks', 'until', 'they', 'finish', 'cleanly',
];

/** The up-front generator: every piece made, then the text cut before the earliest stop sequence. */
function referenceChoice(request: GenerationRequest) {
  const random = seededRandom(hashText(`${request.seed}\u0000${request.choiceIndex}\u0000${request.promptText}`));
  const pieces: string[] = [];
  let previousWasWord = false;
  for (let index = 0; index < request.maxTokens; index += 1) {
    const roll = random();
    if (previousWasWord && roll < 0.12) {
      pieces.push([',', '.'][roll < 0.07 ? 0 : 1]);
      previousWasWord = false;
    } else {
      const word = WORDS[Math.floor(random() * WORDS.length)];
      pieces.push(index === 0 ? word : ` ${word}`);
      previousWasWord = true;
    }
  }
  const fullText = pieces.join('');
  let cutAt = -1;
  for (const sequence of request.stop) {
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
    if (part.trim() !== '') kept.push(part);
  }
  const text = kept.join('');
  return { pieces: kept, text, finishReason: 'stop', completionTokens: countTokens(text) };
}

function piecesOf(request: GenerationRequest): string[] {
  const generator = new ChoiceGenerator(request);
  const pieces: string[] = [];
  for (let piece = generator.next(); piece !== undefined; piece = generator.next()) pieces.push(piece);
  expect(generator.next()).toBeUndefined();
  return pieces;
}

// Stop sequences that occur (words, spans across pieces, punctuation, a longer one starting
// before a shorter one) as well as arbitrary strings.
const stopSequence = fc.oneof(
  fc.constantFrom(' the', 'e', ',', '. ', 'the model', 's r', ' ', 'a', 'model serves', 'odel'),
  fc.string({ maxLength: 8 }),
);
const generationRequest = fc.record({
  promptText: fc.string({ maxLength: 20 }),
  seed: fc.integer(),
  maxTokens: fc.integer({ min: 1, max: 80 }),
  stop: fc.array(stopSequence, { maxLength: 4 }),
  choiceIndex: fc.nat(20),
});

describe('ChoiceGenerator', () => {
  test('gives exactly the up-front answer: the same pieces, text, finish reason and token count', () => {
    fc.assert(fc.property(generationRequest, (request) => {
      const reference = referenceChoice(request);
      expect(piecesOf(request)).toEqual(reference.pieces);
      expect(generateAnswer(request)).toEqual({ text: reference.text, finishReason: reference.finishReason, completionTokens: reference.completionTokens });
    }), { numRuns: 3_000 });
  });

  test('a choice of 65,536 tokens is made piece by piece: the first piece comes without making the rest', () => {
    const request = { promptText: 'hi', seed: 1, maxTokens: 65_536, stop: ['never-appears'], choiceIndex: 0 };
    const generator = new ChoiceGenerator(request);
    const first = generator.next();
    expect(first).toBe(referenceChoice({ ...request, maxTokens: 1, stop: [] }).pieces[0]);
    // Held back: at most the text the longest stop sequence could still span.
    expect((generator as unknown as { held: string[] }).held.join('').length).toBeLessThan(request.stop[0].length + 16);
  });
});
