import type { CatalogModel } from '../catalog/catalog';
import { AppError } from '../errors/app-error';
import { parseJsonObject } from './json-body';
import { quoteValue } from '../errors/quote-value';
import { refuseCacheSalt } from './cache-salt-field';

/** OpenAI's own cap on the inputs of one embeddings request. */
export const MAX_EMBEDDING_INPUTS = 2048;

export type EmbeddingInput = string | number[];

/** What the embeddings route or a batch line needs from an embeddings body; other fields (`user`, unknown ones) pass through. */
export interface EmbeddingsRequest {
  model: string | undefined;
  /** The inputs in order: a lone string or token array becomes a list of one. */
  inputs: EmbeddingInput[];
  /** The parsed body, for rebuilding one body per batch when the request is split. */
  fields: Record<string, unknown>;
}

type EmbeddingLimits = NonNullable<CatalogModel['embedding']>;

/**
 * Checks an embeddings body as OpenAI defines it, against the model's limits, so bad input is
 * a 400 naming the field instead of an engine error. String inputs are measured in tokens by
 * the engine (only it has the model's tokenizer); token-id inputs are measured here.
 */
export function parseEmbeddingsRequest(raw: Buffer, modelId: string, limits: EmbeddingLimits): EmbeddingsRequest {
  const fields = parseJsonObject(raw);
  // Embedding replicas serve their owner alone, but the field means the same on every endpoint.
  refuseCacheSalt(fields);
  const inputs = checkInput(fields.input, limits.maxInputTokens);
  const model = fields.model;
  if (model !== undefined && model !== null && typeof model !== 'string') throw invalid(`model must be a string, got ${quoteValue(model)}`, 'model');
  const format = fields.encoding_format;
  if (format !== undefined && format !== null && format !== 'float' && format !== 'base64') {
    throw invalid(`encoding_format must be "float" or "base64", got ${quoteValue(format)}`, 'encoding_format');
  }
  checkDimensions(fields.dimensions, modelId, limits);
  const user = fields.user;
  if (user !== undefined && user !== null && typeof user !== 'string') throw invalid(`user must be a string, got ${quoteValue(user)}`, 'user');
  return { model: typeof model === 'string' ? model : undefined, inputs, fields };
}

const INPUT_SHAPES = 'a non-empty string, an array of non-empty strings, an array of token ids or an array of token-id arrays';

function checkInput(input: unknown, maxInputTokens: number): EmbeddingInput[] {
  if (input === undefined || input === null) throw invalid(`input is required: ${INPUT_SHAPES}`, 'input');
  if (typeof input === 'string') {
    if (input.length === 0) throw invalid('input must not be an empty string', 'input');
    return [input];
  }
  if (!Array.isArray(input)) throw invalid(`input must be ${INPUT_SHAPES}; got ${typeName(input)}`, 'input');
  if (input.length === 0) throw invalid('input must not be an empty array', 'input');
  if (typeof input[0] === 'number') {
    checkTokens(input, 'input', maxInputTokens);
    return [input as number[]];
  }
  if (input.length > MAX_EMBEDDING_INPUTS) {
    throw invalid(`input has ${input.length} items; at most ${MAX_EMBEDDING_INPUTS} inputs per request`, 'input');
  }
  const strings = typeof input[0] === 'string';
  input.forEach((item, index) => {
    const param = `input[${index}]`;
    if (strings) {
      if (typeof item !== 'string') throw invalid(`${param} must be a string like the other inputs, got ${typeName(item)}`, param);
      if (item.length === 0) throw invalid(`${param} must not be an empty string`, param);
    } else {
      if (!Array.isArray(item)) throw invalid(`${param} must be a string or an array of token ids, got ${typeName(item)}`, param);
      if (item.length === 0) throw invalid(`${param} must not be an empty array of token ids`, param);
      checkTokens(item, param, maxInputTokens);
    }
  });
  return input as EmbeddingInput[];
}

function checkTokens(tokens: unknown[], param: string, maxInputTokens: number): void {
  const bad = tokens.findIndex((token) => !Number.isInteger(token) || (token as number) < 0);
  if (bad !== -1) throw invalid(`${param}[${bad}] must be a token id (an integer of at least 0), got ${quoteValue(tokens[bad])}`, `${param}[${bad}]`);
  if (tokens.length > maxInputTokens) {
    throw invalid(`${param} is ${tokens.length} tokens, over the model's limit of ${maxInputTokens} input tokens; shorten or split it (inputs are never truncated)`, param);
  }
}

function checkDimensions(dimensions: unknown, modelId: string, limits: EmbeddingLimits): void {
  if (dimensions === undefined || dimensions === null) return;
  if (limits.minDimensions === undefined) {
    throw invalid(`dimensions is not supported by ${modelId}: its vectors always have ${limits.dimensions} dimensions; omit the field`, 'dimensions');
  }
  if (!Number.isInteger(dimensions) || (dimensions as number) < limits.minDimensions || (dimensions as number) > limits.dimensions) {
    throw invalid(`dimensions must be an integer from ${limits.minDimensions} to ${limits.dimensions} for ${modelId}, got ${quoteValue(dimensions)}`, 'dimensions');
  }
}

function typeName(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  return `a ${typeof value}`;
}

function invalid(message: string, param: string): AppError {
  return new AppError('invalid_request', message, { param });
}
