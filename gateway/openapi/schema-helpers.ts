/** A JSON Schema (draft 2020-12, OpenAPI 3.1's dialect) or any other part of the document, as plain data. */
export type JsonObject = Record<string, unknown>;

export const ref = (name: string): JsonObject => ({ $ref: `#/components/schemas/${name}` });
export const string = (description?: string): JsonObject => (description ? { type: 'string', description } : { type: 'string' });
export const integer = (description?: string): JsonObject => (description ? { type: 'integer', description } : { type: 'integer' });
export const number = (description?: string): JsonObject => (description ? { type: 'number', description } : { type: 'number' });
export const boolean = (description?: string): JsonObject => (description ? { type: 'boolean', description } : { type: 'boolean' });
export const constant = (value: string): JsonObject => ({ type: 'string', const: value });
export const oneOfStrings = (values: readonly string[], description?: string): JsonObject => ({ type: 'string', enum: values, ...(description ? { description } : {}) });
export const nullable = (schema: JsonObject): JsonObject => ({ anyOf: [schema, { type: 'null' }] });
export const array = (items: JsonObject, description?: string): JsonObject => ({ type: 'array', items, ...(description ? { description } : {}) });
/** Unix seconds, as OpenAI's objects give times. */
export const unixSeconds = (description: string): JsonObject => ({ type: 'integer', description });

/**
 * An object the gateway writes itself: closed (`additionalProperties: false`), so a field added
 * to the code and not to the document fails the conformance test instead of drifting.
 */
export function closedObject(properties: Record<string, JsonObject>, required: readonly string[] = Object.keys(properties), description?: string): JsonObject {
  return { type: 'object', ...(description ? { description } : {}), properties, required, additionalProperties: false };
}

/**
 * An object an engine writes (chat, completions, embeddings) or a request body whose other
 * standard fields pass to the engine: open, as OpenAI's own schemas are, since engines add
 * fields (vLLM's `stop_reason`, …) that clients ignore.
 */
export function openObject(properties: Record<string, JsonObject>, required: readonly string[], description?: string): JsonObject {
  return { type: 'object', ...(description ? { description } : {}), properties, required };
}
