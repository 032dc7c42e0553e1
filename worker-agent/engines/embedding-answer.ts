/**
 * What the in-process engines (CPU, llama.cpp) share for `/v1/embeddings`: reading the inputs
 * and `dimensions` of a job body, and writing OpenAI's answer, float or base64.
 */
import type { Usage } from '../../proto/worker/v1/index';
import { EngineFailure } from './engine-failure';

export type EmbeddingInput = string | number[];

export interface EmbeddingAnswer {
  readonly body: Buffer;
  readonly usage: Usage;
}

/** The inputs in order (a lone string or token array is a list of one); re-checked, as the engines are also called directly. */
export function embeddingInputs(input: unknown): EmbeddingInput[] {
  if (typeof input === 'string') return [input];
  if (Array.isArray(input) && input.length > 0) {
    if (input.every((item) => typeof item === 'string')) return input as string[];
    if (input.every((item) => Number.isInteger(item))) return [input as number[]];
    if (input.every((item) => Array.isArray(item) && item.every((token) => Number.isInteger(token)))) return input as number[][];
  }
  throw new EngineFailure('invalid_job', 'input must be a string, an array of strings, an array of token ids or an array of token-id arrays');
}

/** The vector length asked for: `dimensions` when set (the gateway allows it only on Matryoshka models), else the native one. */
export function requestedDimensions(requested: unknown, native: number): number {
  if (requested === undefined || requested === null) return native;
  if (!Number.isInteger(requested) || (requested as number) < 1 || (requested as number) > native) {
    throw new EngineFailure('invalid_job', `dimensions must be an integer from 1 to ${native}`);
  }
  return requested as number;
}

export function tooLong(index: number, tokens: number, maxInputTokens: number): EngineFailure {
  return new EngineFailure('invalid_job',
    `input[${index}] is ${tokens} tokens, over the model's limit of ${maxInputTokens} input tokens; shorten or split it (inputs are never truncated)`);
}

/** The first `dimensions` components scaled to unit length (Matryoshka truncation; a no-op cut at full length). */
export function unitLength(vector: ArrayLike<number>, dimensions: number): Float32Array {
  const result = Float32Array.from({ length: dimensions }, (_, index) => vector[index]);
  let norm = 0;
  for (const value of result) norm += value * value;
  const scale = norm > 0 ? 1 / Math.sqrt(norm) : 1;
  for (let index = 0; index < dimensions; index += 1) result[index] *= scale;
  return result;
}

/**
 * OpenAI's list. Vectors are float32, as they travel in base64, so a float answer decodes to
 * the very numbers a base64 answer carries.
 */
export function embeddingAnswer(vectors: readonly Float32Array[], promptTokens: number, model: string, base64: boolean): EmbeddingAnswer {
  const data = vectors.map((vector, index) => ({
    object: 'embedding', index,
    embedding: base64 ? Buffer.from(vector.buffer, vector.byteOffset, vector.byteLength).toString('base64') : Array.from(vector),
  }));
  const body = { object: 'list', data, model, usage: { prompt_tokens: promptTokens, total_tokens: promptTokens } };
  return { body: Buffer.from(JSON.stringify(body)), usage: { promptTokens, completionTokens: 0, totalTokens: promptTokens } };
}
