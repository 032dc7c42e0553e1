import { ERROR_TABLE } from '../../control-plane/api/errors';
import { closedObject, nullable, openObject, string, type JsonObject } from './schema-helpers';

export const ERROR_SCHEMA: JsonObject = closedObject({
  error: openObject({
    message: string(), type: string('OpenAI\'s `error.type`'), param: nullable(string('the offending field')), code: nullable(string()),
  }, ['message', 'type', 'param', 'code']),
}, undefined, 'OpenAI\'s error body (docs/api-contract.md#errors).');

const RETRY_AFTER = { description: 'seconds to wait before retrying', schema: { type: 'integer' } };

const WHEN: Record<number, string> = {
  400: 'Malformed or refused input; `param` names the field. On text endpoints an engine\'s own 4xx body is relayed as it is.',
  401: 'A missing or bad API key.',
  402: 'The workspace\'s credit is used up, or cannot hold the request\'s worst case.',
  403: 'A record of another workspace.',
  404: 'No such deployment, endpoint, model or record.',
  409: 'The record is in a state that does not allow it.',
  413: 'The body is over the size limit.',
  422: 'A value the model or the platform does not offer (sizes, durations, webhook URLs, storage credentials).',
  429: 'A rate limit, the replicas\' concurrency, or the shared pool\'s fair share; see `Retry-After`.',
  500: 'An unexpected failure; no internals are shown.',
  502: 'The GPU worker or the storage failed.',
  503: 'The deployment is paused, no replica can take the call, or the server is busy.',
  504: 'The call ran out of time.',
};

/** The `code`s each HTTP status carries, from the one error table, so the document lists exactly what the code sends. */
function codesOf(status: number): string[] {
  return Object.entries(ERROR_TABLE).filter(([, wire]) => wire.status === status).map(([code]) => code).sort();
}

/** `components.responses`: one error response per status, named `Error<status>`. */
export function errorResponses(): Record<string, JsonObject> {
  const responses: Record<string, JsonObject> = {};
  for (const status of Object.keys(WHEN).map(Number)) {
    // 400 is left open: an engine's refusal keeps its own body and code.
    const schema = status === 400 ? { $ref: '#/components/schemas/Error' } : {
      allOf: [{ $ref: '#/components/schemas/Error' }, { type: 'object', properties: { error: { type: 'object', properties: { code: { enum: codesOf(status) } } } } }],
    };
    responses[`Error${status}`] = {
      description: WHEN[status],
      ...(status === 429 || status === 503 ? { headers: { 'Retry-After': RETRY_AFTER } } : {}),
      content: { 'application/json': { schema } },
    };
  }
  return responses;
}

/** The `responses` entries of `statuses`, each a reference to its `Error<status>`. */
export function errors(...statuses: number[]): Record<string, JsonObject> {
  return Object.fromEntries(statuses.map((status) => [String(status), { $ref: `#/components/responses/Error${status}` }]));
}
