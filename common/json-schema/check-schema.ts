/**
 * The JSON Schema subset the platform accepts for `response_format.json_schema.schema` and a
 * tool's `parameters`: what the `openai` SDK's zod helpers (zod 4's `toJSONSchema`), LangChain
 * and the Vercel AI SDK emit, and what OpenAI's structured outputs document. Any other keyword is
 * refused with its path, so a constraint is never silently dropped: an engine that cannot
 * enforce `if`/`then` would otherwise answer JSON the client's parser rejects.
 */
import { compilePattern } from './schema-pattern';
import { resolveLocalRef } from './schema-refs';
import type { PathSegment } from './schema-path';

export interface SchemaProblem {
  /** Where in the schema, e.g. `['properties', 'name', 'pattern']`. */
  readonly path: readonly PathSegment[];
  readonly message: string;
}

export const SCHEMA_TYPES = ['string', 'number', 'integer', 'boolean', 'object', 'array', 'null'] as const;
export type SchemaType = (typeof SCHEMA_TYPES)[number];

/** Bounds on what an instance must hold, so making one (generate-instance.ts) stays cheap. */
export const MAX_MIN_ITEMS = 1_024;
export const MAX_MIN_LENGTH = 65_536;

/** A string: the keyword's own value is wrong; a SchemaProblem: one of its subschemas is. */
type KeywordCheck = (value: unknown, context: CheckContext) => string | SchemaProblem | null;

interface CheckContext {
  readonly root: unknown;
  readonly path: PathSegment[];
  /** Checks a subschema at `path` + `segments`; returns its first problem. */
  sub(value: unknown, ...segments: PathSegment[]): SchemaProblem | null;
}

const isObject = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);
const isCount = (value: unknown) => Number.isInteger(value) && (value as number) >= 0;
const isFiniteNumber = (value: unknown) => typeof value === 'number' && Number.isFinite(value);

const annotation = (expected: 'string' | 'boolean') => (value: unknown) => (typeof value === expected ? null : `must be a ${expected}`);
const count = (maximum: number) => (value: unknown) => {
  if (!isCount(value)) return 'must be a non-negative integer';
  return (value as number) > maximum ? `above ${maximum} is not supported` : null;
};
const bound = (value: unknown) => (isFiniteNumber(value) ? null : 'must be a number');

/** Keyword → how its value is checked; a subschema problem is reported through `context.sub`. */
const KEYWORDS: Readonly<Record<string, KeywordCheck>> = {
  $schema: annotation('string'),
  $id: annotation('string'),
  $comment: annotation('string'),
  title: annotation('string'),
  description: annotation('string'),
  deprecated: annotation('boolean'),
  readOnly: annotation('boolean'),
  writeOnly: annotation('boolean'),
  default: () => null,
  examples: (value) => (Array.isArray(value) ? null : 'must be an array'),
  type: (value) => {
    const types = Array.isArray(value) ? value : [value];
    if (types.length === 0 || new Set(types).size !== types.length) return 'must be a type name or a non-empty array of distinct type names';
    const unknown = types.find((type) => !(SCHEMA_TYPES as readonly unknown[]).includes(type));
    return unknown === undefined ? null : `must be one of ${SCHEMA_TYPES.join(', ')} (or an array of them), got ${JSON.stringify(unknown)}`;
  },
  enum: (value) => (Array.isArray(value) && value.length > 0 ? null : 'must be a non-empty array'),
  const: () => null,
  properties: (value, context) => schemaMap(value, context, 'properties'),
  $defs: (value, context) => schemaMap(value, context, '$defs'),
  definitions: (value, context) => schemaMap(value, context, 'definitions'),
  required: (value) => (Array.isArray(value) && value.every((name) => typeof name === 'string') ? null : 'must be an array of property names'),
  additionalProperties: (value, context) => subProblem(context, value, 'additionalProperties'),
  propertyNames: (value, context) => subProblem(context, value, 'propertyNames'),
  anyOf: (value, context) => schemaList(value, context, 'anyOf'),
  oneOf: (value, context) => schemaList(value, context, 'oneOf'),
  allOf: (value, context) => schemaList(value, context, 'allOf'),
  // Draft 2020-12 `items` is one schema; draft-07's tuple form (an array) is what the AI SDK sends for a zod tuple.
  items: (value, context) => (Array.isArray(value) ? schemaList(value, context, 'items') : subProblem(context, value, 'items')),
  prefixItems: (value, context) => schemaList(value, context, 'prefixItems'),
  additionalItems: (value, context) => subProblem(context, value, 'additionalItems'),
  minItems: count(MAX_MIN_ITEMS),
  maxItems: count(Number.MAX_SAFE_INTEGER),
  minLength: count(MAX_MIN_LENGTH),
  maxLength: count(Number.MAX_SAFE_INTEGER),
  minimum: bound,
  maximum: bound,
  exclusiveMinimum: bound,
  exclusiveMaximum: bound,
  multipleOf: (value) => (isFiniteNumber(value) && (value as number) > 0 ? null : 'must be a number above 0'),
  pattern: (value) => {
    if (typeof value !== 'string') return 'must be a string (an ECMA-262 regular expression)';
    return compilePattern(value) ? null : 'is not a valid regular expression';
  },
  format: annotation('string'),
  $ref: (value, context) => {
    if (typeof value !== 'string') return 'must be a string';
    const target = resolveLocalRef(context.root, value);
    if (target === undefined) return `must point into this schema ("#", "#/$defs/Name"); ${JSON.stringify(value.slice(0, 100))} does not`;
    return typeof target === 'boolean' || isObject(target) ? null : `${JSON.stringify(value.slice(0, 100))} does not point at a schema`;
  },
};

export const SUPPORTED_KEYWORDS: readonly string[] = Object.keys(KEYWORDS);

/** The first problem of `schema` (a JSON Schema object, or a boolean below the root), or null when it is in the subset. */
export function checkJsonSchema(schema: unknown): SchemaProblem | null {
  if (!isObject(schema)) return { path: [], message: 'must be a JSON Schema object' };
  return checkNode(schema, schema, []);
}

function checkNode(schema: unknown, root: unknown, path: PathSegment[]): SchemaProblem | null {
  if (typeof schema === 'boolean') return null;
  if (!isObject(schema)) return { path, message: 'must be a JSON Schema (an object or a boolean)' };
  const context: CheckContext = { root, path, sub: (value, ...segments) => checkNode(value, root, [...path, ...segments]) };
  for (const [keyword, value] of Object.entries(schema)) {
    const check = KEYWORDS[keyword];
    if (!check) {
      return { path: [...path, keyword], message: `uses the keyword ${JSON.stringify(keyword)}, which is not supported; supported keywords: ${SUPPORTED_KEYWORDS.join(', ')}` };
    }
    const problem = check(value, context);
    if (problem === null) continue;
    if (typeof problem !== 'string') return problem;
    return { path: [...path, keyword], message: `${keyword} ${problem}` };
  }
  return null;
}

function subProblem(context: CheckContext, value: unknown, keyword: string, ...rest: PathSegment[]): SchemaProblem | null {
  return context.sub(value, keyword, ...rest);
}

function schemaMap(value: unknown, context: CheckContext, keyword: string): string | SchemaProblem | null {
  if (!isObject(value)) return 'must be an object of schemas';
  for (const [name, schema] of Object.entries(value)) {
    const problem = subProblem(context, schema, keyword, name);
    if (problem !== null) return problem;
  }
  return null;
}

function schemaList(value: unknown, context: CheckContext, keyword: string): string | SchemaProblem | null {
  if (!Array.isArray(value) || value.length === 0) return 'must be a non-empty array of schemas';
  for (const [index, schema] of value.entries()) {
    const problem = subProblem(context, schema, keyword, index);
    if (problem !== null) return problem;
  }
  return null;
}
