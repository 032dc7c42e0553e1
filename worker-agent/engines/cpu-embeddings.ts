/**
 * The CPU engine's embeddings: no weights, so each vector is drawn from a generator seeded by
 * a hash of the model and the input, then scaled to unit length. The same input always gets
 * the same vector and different inputs practically never do, which is what retrieval tests
 * and local runs need; the vectors carry no meaning.
 */
import { createHash } from 'node:crypto';
import type { EmbeddingSpec } from '../../proto/worker/v1/index';
import { countTokens } from './cpu-tokenizer';
import { embeddingAnswer, embeddingInputs, requestedDimensions, tooLong, unitLength, type EmbeddingAnswer, type EmbeddingInput } from './embedding-answer';
import { seededRandom } from '../../common/seeded-random';

/** The vector size when a job carries no `Assign.embedding` (an older control plane). */
export const DEFAULT_CPU_EMBEDDING_DIMENSIONS = 1024;

/**
 * Answers one `/v1/embeddings` body as OpenAI does; an input over the limit fails with `invalid_job`.
 * @param model what the vectors are drawn from (the engine's model)
 * @param answerModel the answer's `model` (the catalog model, when the engine knows it by another name)
 */
export function cpuEmbeddings(payload: Record<string, unknown>, spec: EmbeddingSpec | null | undefined, model: string, answerModel = model): EmbeddingAnswer {
  const inputs = embeddingInputs(payload.input);
  const dimensions = requestedDimensions(payload.dimensions, spec?.dimensions || DEFAULT_CPU_EMBEDDING_DIMENSIONS);
  const maxInputTokens = spec?.maxInputTokens || Number.MAX_SAFE_INTEGER;
  let promptTokens = 0;
  const vectors = inputs.map((input, index) => {
    const tokens = typeof input === 'string' ? countTokens(input) : input.length;
    if (tokens > maxInputTokens) throw tooLong(index, tokens, maxInputTokens);
    promptTokens += tokens;
    return randomUnitVector(model, input, dimensions);
  });
  return embeddingAnswer(vectors, promptTokens, answerModel, payload.encoding_format === 'base64');
}

function randomUnitVector(model: string, input: EmbeddingInput, dimensions: number): Float32Array {
  const key = typeof input === 'string' ? `s:${input}` : `t:${input.join(',')}`;
  const digest = createHash('sha256').update(model).update('\0').update(key).digest();
  const next = seededRandom(digest.readUInt32LE(0) ^ digest.readUInt32LE(4));
  // Two uniforms per component keeps the values centred without a normal sampler.
  return unitLength(Array.from({ length: dimensions }, () => next() + next() - 1), dimensions);
}
