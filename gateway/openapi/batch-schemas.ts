import { BATCH_ENDPOINTS, BATCH_STATUSES } from '../../control-plane/api/records';
import { array, boolean, closedObject, constant, integer, nullable, oneOfStrings, openObject, ref, string, type JsonObject } from './schema-helpers';

const TIME = nullable(integer());
/** OpenAI's cursor list around `item`. */
const cursorList = (item: string): JsonObject => closedObject({
  object: constant('list'), data: array(ref(item)), first_id: nullable(string()), last_id: nullable(string()), has_more: boolean(),
});

export const BATCH_SCHEMAS: Record<string, JsonObject> = {
  FileUploadRequest: closedObject({
    file: { type: 'string', description: 'one JSONL file of request lines (batch), or a LoRA adapter\'s weights (user_data, docs/adapters.md)' },
    purpose: oneOfStrings(['batch', 'user_data']),
  }),
  File: closedObject({
    id: string(), object: constant('file'), bytes: integer(), created_at: integer(), filename: string(),
    purpose: oneOfStrings(['batch', 'batch_output', 'user_data']), status: constant('processed'), expires_at: { type: 'null', description: 'files are kept until deleted' },
    status_details: { type: 'null' },
  }),
  FileList: cursorList('File'),
  FileDeleted: closedObject({ id: string(), object: constant('file'), deleted: { type: 'boolean', const: true } }),
  BatchCreateRequest: openObject({
    input_file_id: string(), endpoint: oneOfStrings(BATCH_ENDPOINTS, 'among those the model allows'), completion_window: constant('24h'),
    metadata: nullable({ type: 'object', additionalProperties: { type: 'string' } }),
  }, ['input_file_id', 'endpoint', 'completion_window']),
  Batch: closedObject({
    id: string(), object: constant('batch'), endpoint: oneOfStrings(BATCH_ENDPOINTS), model: nullable(string()),
    errors: nullable(closedObject({
      object: constant('list'),
      data: array(closedObject({ code: string(), message: string(), param: nullable(string()), line: nullable(integer('counted from 1')) })),
    })),
    input_file_id: string(), completion_window: string(), status: oneOfStrings(BATCH_STATUSES),
    output_file_id: nullable(string()), error_file_id: nullable(string()),
    created_at: integer(), in_progress_at: TIME, expires_at: TIME, finalizing_at: TIME, completed_at: TIME, failed_at: TIME,
    expired_at: TIME, cancelling_at: TIME, cancelled_at: TIME,
    request_counts: closedObject({ total: integer(), completed: integer(), failed: integer() }),
    usage: closedObject({
      input_tokens: integer(), input_tokens_details: closedObject({ cached_tokens: integer() }),
      output_tokens: integer(), output_tokens_details: closedObject({ reasoning_tokens: integer() }), total_tokens: integer(),
    }),
    metadata: nullable({ type: 'object', additionalProperties: { type: 'string' } }),
  }),
  BatchList: cursorList('Batch'),
};
