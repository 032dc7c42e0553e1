import type { CatalogModel } from '../catalog/catalog';
import { findLoneSurrogate, findNulByte } from '../database/nul-bytes';
import { AppError } from '../errors/app-error';
import { quoteValue } from '../errors/quote-value';
import type { BatchEndpoint } from './batch.entities';

/** `POST /batches` as the client sent it (a parsed JSON object). */
export type BatchCreateFields = Record<string, unknown>;

export interface BatchCreateInput {
  readonly inputFileId: string;
  readonly endpoint: BatchEndpoint;
  readonly completionWindow: '24h';
  readonly metadata: Record<string, string> | null;
}

/** OpenAI's metadata limits. */
const MAX_METADATA_PAIRS = 16;
const MAX_METADATA_KEY = 64;
const MAX_METADATA_VALUE = 512;

/**
 * The endpoints a batch on a deployment of `model` may name: what its live endpoint answers
 * (chat models chat and completions, base models completions, embedding models embeddings);
 * none for image and video models.
 */
export function batchEndpointsOf(model: Pick<CatalogModel, 'task' | 'modality'> | undefined): BatchEndpoint[] {
  if (!model || model.modality !== 'text') return [];
  if (model.task === 'chat') return ['/v1/chat/completions', '/v1/completions', '/v1/responses'];
  if (model.task === 'completion') return ['/v1/completions'];
  if (model.task === 'embedding') return ['/v1/embeddings'];
  return [];
}

/** Checks a batch's fields with OpenAI's rules, each refusal a 400 naming the field and what it may be. */
export function readBatchCreateInput(fields: BatchCreateFields, model: Pick<CatalogModel, 'id' | 'task' | 'modality'> | undefined, modelId: string): BatchCreateInput {
  const inputFileId = fields.input_file_id;
  if (typeof inputFileId !== 'string' || inputFileId.length === 0) {
    throw invalid(`input_file_id is required: the id of a file uploaded with purpose "batch"${inputFileId === undefined ? '' : `; got ${quoteValue(inputFileId)}`}`, 'input_file_id');
  }
  const allowed = batchEndpointsOf(model);
  const endpoint = fields.endpoint;
  if (allowed.length === 0) {
    throw invalid(`this deployment's model '${modelId}' is not a text or embedding model: batches run on deployments of chat, completion and embedding models`, 'endpoint');
  }
  if (typeof endpoint !== 'string' || !(allowed as string[]).includes(endpoint)) {
    throw invalid(`endpoint must be ${allowed.map((value) => `"${value}"`).join(' or ')} on this deployment (model '${modelId}'); got ${quoteValue(endpoint ?? null)}`, 'endpoint');
  }
  const window = fields.completion_window;
  if (window !== '24h') throw invalid(`completion_window must be "24h"; got ${quoteValue(window ?? null)}`, 'completion_window');
  if (fields.output_expires_after !== undefined && fields.output_expires_after !== null) {
    throw invalid('output_expires_after is not supported: output and error files are kept until deleted (DELETE /v1/files/{id})', 'output_expires_after');
  }
  return { inputFileId, endpoint: endpoint as BatchEndpoint, completionWindow: '24h', metadata: readMetadata(fields.metadata) };
}

function readMetadata(metadata: unknown): Record<string, string> | null {
  if (metadata === undefined || metadata === null) return null;
  if (typeof metadata !== 'object' || Array.isArray(metadata)) throw invalid(`metadata must be an object of up to ${MAX_METADATA_PAIRS} string values`, 'metadata');
  const entries = Object.entries(metadata as Record<string, unknown>);
  if (entries.length > MAX_METADATA_PAIRS) throw invalid(`metadata has ${entries.length} keys; at most ${MAX_METADATA_PAIRS}`, 'metadata');
  if (findNulByte(metadata) || findLoneSurrogate(metadata)) {
    throw invalid('metadata must not contain NUL characters (\\u0000) or unpaired surrogates, which cannot be stored', 'metadata');
  }
  for (const [key, value] of entries) {
    if (key.length > MAX_METADATA_KEY) throw invalid(`metadata keys are at most ${MAX_METADATA_KEY} characters; ${quoteValue(key)} is ${key.length}`, 'metadata');
    if (typeof value !== 'string') throw invalid(`metadata.${key} must be a string, got ${quoteValue(value)}`, `metadata.${key}`);
    if (value.length > MAX_METADATA_VALUE) throw invalid(`metadata.${key} is ${value.length} characters; values are at most ${MAX_METADATA_VALUE}`, `metadata.${key}`);
  }
  return Object.fromEntries(entries) as Record<string, string>;
}

function invalid(message: string, param: string): AppError {
  return new AppError('invalid_request', message, { param });
}
