/**
 * Turns the JSON Schema a client sends (zod 4 `z.toJSONSchema`, OpenAI's `zodResponseFormat`,
 * hand-written draft-07 / 2020-12) into the schema dialect node-llama-cpp builds a grammar
 * from (`GbnfJsonSchema`). Every keyword is either honoured by the grammar, an annotation that
 * does not change which values are valid, or refused with a 400 that names it: a keyword the
 * grammar would silently drop would let the model produce output the schema rejects.
 *
 * What the grammar does with what it honours:
 * - every property in `properties` is generated, optional ones too (an optional property that
 *   is present is still valid); no other property unless `additionalProperties` allows them;
 * - `anyOf`/`oneOf` are alternatives (a `oneOf` whose branches overlap could match twice:
 *   zod's discriminated unions, what clients send, cannot);
 * - numbers have at most 15 integer digits and no exponent (grammar-numbers in llama-grammar.ts),
 *   so bounds at or beyond ±1e15 (zod's safe-integer bounds) always hold; closer ones are refused.
 */
import type { GbnfJsonSchema } from 'node-llama-cpp';
import { invalidRequestFailure } from '../engines/request-fields';
import { isObject } from '../engines/engine-request';

/** Grammar numbers stay strictly inside ±GRAMMAR_NUMBER_LIMIT (see llama-grammar.ts). */
export const GRAMMAR_NUMBER_LIMIT = 1e15;

/** llama.cpp refuses a grammar repetition above this many (`MAX_REPETITION_THRESHOLD`): larger counts are refused here, by name. */
export const GRAMMAR_REPETITION_LIMIT = 2000;

/** Keywords that never change which values are valid. */
const ANNOTATIONS = new Set([
  '$schema', '$id', '$comment', '$anchor', 'title', 'description', 'default', 'examples', 'example',
  'readOnly', 'writeOnly', 'deprecated', 'contentEncoding', 'contentMediaType', 'strict',
]);
const FORMATS = new Set(['date-time', 'date', 'time']);
const TYPES = ['string', 'number', 'integer', 'boolean', 'null', 'object', 'array'] as const;
type JsonType = (typeof TYPES)[number];
const TYPE_KEYWORDS: Record<JsonType, readonly string[]> = {
  string: ['minLength', 'maxLength', 'format'],
  number: ['minimum', 'maximum', 'exclusiveMinimum', 'exclusiveMaximum'],
  integer: ['minimum', 'maximum', 'exclusiveMinimum', 'exclusiveMaximum'],
  boolean: [],
  null: [],
  object: ['properties', 'required', 'additionalProperties', 'minProperties', 'maxProperties', 'unevaluatedProperties', 'propertyNames'],
  array: ['items', 'prefixItems', 'additionalItems', 'minItems', 'maxItems', 'uniqueItems'],
};
/** The name the root schema gets among the definitions when something refers to it (`"$ref": "#"`). */
const ROOT_DEFINITION = '__root';

export type GrammarSchema = GbnfJsonSchema & { readonly $defs?: Record<string, GbnfJsonSchema> };

/** A JSON value of any shape (node-llama-cpp reads a schema without `type` as `null`). */
const ANY_VALUE: GbnfJsonSchema = {
  oneOf: [{ type: ['string', 'number', 'boolean', 'null'] }, { type: 'object', additionalProperties: true }, { type: 'array' }],
};

/**
 * The grammar schema for `schema`; `param` names the request field in a refusal
 * (`response_format.json_schema.schema`, `tools[0].function.parameters`).
 */
export function toGrammarSchema(schema: unknown, param: string, definitionPrefix = ''): GrammarSchema {
  return new SchemaConverter(schema, param, definitionPrefix).convertRoot();
}

class SchemaConverter {
  /** Definition pointer (`#/$defs/a`, `#/definitions/a`) → its name among the converted definitions. */
  private readonly names = new Map<string, string>();
  private readonly converted: Record<string, GbnfJsonSchema> = {};
  private rootReferenced = false;

  /** @param prefix of the converted definitions' names, so schemas converted apart can share one `$defs`. */
  constructor(private readonly root: unknown, private readonly param: string, private readonly prefix: string) {}

  private get rootName(): string {
    return `${this.prefix}${ROOT_DEFINITION}`;
  }

  convertRoot(): GrammarSchema {
    if (!isObject(this.root)) this.refuse('', 'the schema must be a JSON Schema object');
    for (const keyword of ['$defs', 'definitions'] as const) {
      const definitions = this.root[keyword];
      if (definitions === undefined) continue;
      if (!isObject(definitions)) this.refuse(keyword, `\`${keyword}\` must be an object of schemas`);
      for (const name of Object.keys(definitions)) this.names.set(`#/${keyword}/${escapePointer(name)}`, `${this.prefix}d${this.names.size}`);
    }
    for (const keyword of ['$defs', 'definitions'] as const) {
      const definitions = (this.root[keyword] ?? {}) as Record<string, unknown>;
      for (const [name, definition] of Object.entries(definitions)) {
        this.converted[this.names.get(`#/${keyword}/${escapePointer(name)}`)!] = this.convert(definition, `${keyword}.${name}`);
      }
    }
    const top = this.convert(this.root, '', true);
    if (this.rootReferenced) this.converted[this.rootName] = top;
    const body = this.rootReferenced ? { $ref: `#/$defs/${this.rootName}` } : top;
    return (Object.keys(this.converted).length > 0 ? { ...body, $defs: this.converted } : body) as GrammarSchema;
  }

  private convert(schema: unknown, path: string, isRoot = false): GbnfJsonSchema {
    if (schema === true) return ANY_VALUE;
    if (!isObject(schema)) this.refuse(path, 'a schema must be an object (or `true`)');
    const keywords = Object.keys(schema).filter((keyword) => !ANNOTATIONS.has(keyword) && !keyword.startsWith('x-')
      && !(isRoot && (keyword === '$defs' || keyword === 'definitions')));
    const at = (keyword: string) => (path ? `${path}.${keyword}` : keyword);
    if (keywords.length === 0) return ANY_VALUE;
    if (keywords.includes('$ref')) {
      const others = keywords.filter((keyword) => keyword !== '$ref');
      if (others.length > 0) this.refuse(at(others[0]), `\`${others[0]}\` beside \`$ref\` is not supported by the llama-cpp engine's grammar`);
      return this.reference(schema.$ref, at('$ref'));
    }
    for (const keyword of ['anyOf', 'oneOf', 'allOf'] as const) {
      if (!keywords.includes(keyword)) continue;
      const branches = schema[keyword];
      if (!Array.isArray(branches) || branches.length === 0) this.refuse(at(keyword), `\`${keyword}\` must be a non-empty array of schemas`);
      const others = keywords.filter((other) => other !== keyword);
      // allOf of one schema (zod writes a described $ref so) is that schema; an intersection is not a grammar.
      if (keyword === 'allOf' && branches.length > 1) this.refuse(at(keyword), '`allOf` with more than one schema is not supported by the llama-cpp engine\'s grammar');
      if (others.length > 0) this.refuse(at(others[0]), `\`${others[0]}\` beside \`${keyword}\` is not supported by the llama-cpp engine's grammar`);
      const converted = branches.map((branch, index) => this.convert(branch, `${at(keyword)}[${index}]`));
      return converted.length === 1 ? converted[0] : { oneOf: converted };
    }
    if (keywords.includes('const') || keywords.includes('enum')) return this.literals(schema, keywords, at);
    if (keywords.includes('nullable') && schema.nullable === true) {
      const { nullable: _nullable, ...rest } = schema;
      return { oneOf: [this.convert(rest, path, isRoot), { type: 'null' }] };
    }
    const types = this.types(schema, at);
    const allowed = new Set(types.flatMap((type) => ['type', ...TYPE_KEYWORDS[type]]));
    const unknown = keywords.find((keyword) => !allowed.has(keyword) && !(keyword === 'nullable' && schema.nullable === false));
    if (unknown) this.refuse(at(unknown), `\`${unknown}\` is not supported by the llama-cpp engine's grammar${TYPES.some((type) => TYPE_KEYWORDS[type].includes(unknown)) ? ` for type ${types.join('/')}` : ''}`);
    const alternatives = types.map((type) => this.typed(type, schema, at));
    return alternatives.length === 1 ? alternatives[0] : { oneOf: alternatives };
  }

  private types(schema: Record<string, unknown>, at: (keyword: string) => string): JsonType[] {
    const type = schema.type;
    if (type === undefined) {
      // No type: whichever types the other keywords describe, or any value.
      const implied = TYPES.filter((candidate) => TYPE_KEYWORDS[candidate].some((keyword) => keyword in schema) && candidate !== 'integer');
      return implied.length > 0 ? implied : [...TYPES.filter((candidate) => candidate !== 'integer')];
    }
    const list = Array.isArray(type) ? type : [type];
    if (list.length === 0 || !list.every((item): item is JsonType => (TYPES as readonly unknown[]).includes(item))) {
      this.refuse(at('type'), `\`type\` must be one of ${TYPES.join(', ')} or an array of them`);
    }
    return [...new Set(list)];
  }

  private typed(type: JsonType, schema: Record<string, unknown>, at: (keyword: string) => string): GbnfJsonSchema {
    switch (type) {
      case 'string': {
        const format = schema.format;
        if (format !== undefined) {
          if (typeof format !== 'string' || !FORMATS.has(format)) this.refuse(at('format'), `\`format: ${JSON.stringify(format)}\` is not supported by the llama-cpp engine's grammar (only ${[...FORMATS].join(', ')})`);
          if (schema.minLength !== undefined || schema.maxLength !== undefined) this.refuse(at('minLength'), 'string lengths beside `format` are not supported by the llama-cpp engine\'s grammar');
          return { type: 'string', format: format as 'date-time' | 'date' | 'time' };
        }
        return { type: 'string', minLength: this.count(schema, 'minLength', at), maxLength: this.count(schema, 'maxLength', at) };
      }
      case 'number':
      case 'integer':
        this.checkBounds(schema, at);
        return { type };
      case 'boolean':
      case 'null':
        return { type };
      case 'object':
        return this.object(schema, at);
      case 'array':
        return this.array(schema, at);
    }
  }

  private object(schema: Record<string, unknown>, at: (keyword: string) => string): GbnfJsonSchema {
    const properties = schema.properties ?? {};
    if (!isObject(properties)) this.refuse(at('properties'), '`properties` must be an object of schemas');
    const converted = Object.fromEntries(Object.entries(properties).map(([name, property]) => [name, this.convert(property, `${at('properties')}.${name}`)]));
    const required = schema.required ?? [];
    if (!Array.isArray(required) || !required.every((name) => typeof name === 'string')) this.refuse(at('required'), '`required` must be an array of property names');
    // Every listed property is generated, so `required` holds, unless it names one without a schema.
    const missing = required.find((name) => !(name in converted));
    if (missing !== undefined) this.refuse(at('required'), `\`required\` names \`${missing}\`, which \`properties\` does not describe (the llama-cpp engine's grammar generates only described properties)`);
    if (schema.unevaluatedProperties !== undefined && schema.unevaluatedProperties !== false) {
      this.refuse(at('unevaluatedProperties'), 'only `unevaluatedProperties: false` is supported by the llama-cpp engine\'s grammar');
    }
    // Keys are strings anyway: zod's records say so (`propertyNames: {type: "string"}`); any other constraint is not a grammar here.
    const names = schema.propertyNames;
    if (names !== undefined && names !== true && !(isObject(names) && Object.keys(names).every((key) => key === 'type' || ANNOTATIONS.has(key)) && names.type === 'string')) {
      this.refuse(at('propertyNames'), 'only `propertyNames: {"type": "string"}` is supported by the llama-cpp engine\'s grammar');
    }
    const extra = schema.additionalProperties;
    // Absent means "any other property is allowed": generating none is valid, and keeps the object to what was described.
    const additionalProperties = extra === undefined || extra === false || schema.unevaluatedProperties === false ? false
      : extra === true ? true : this.convert(extra, at('additionalProperties'));
    return {
      type: 'object', properties: converted, additionalProperties,
      minProperties: this.count(schema, 'minProperties', at), maxProperties: this.count(schema, 'maxProperties', at),
    };
  }

  private array(schema: Record<string, unknown>, at: (keyword: string) => string): GbnfJsonSchema {
    if (schema.uniqueItems === true) this.refuse(at('uniqueItems'), '`uniqueItems: true` is not supported by the llama-cpp engine\'s grammar');
    // draft-07 tuples: `items` as an array, `additionalItems` for the rest; 2020-12: `prefixItems` and `items`.
    const tuple = Array.isArray(schema.items) ? schema.items : schema.prefixItems;
    const rest = Array.isArray(schema.items) ? schema.additionalItems : schema.items;
    if (tuple !== undefined && !Array.isArray(tuple)) this.refuse(at('prefixItems'), '`prefixItems` must be an array of schemas');
    const prefixItems = tuple?.map((item, index) => this.convert(item, `${at(Array.isArray(schema.items) ? 'items' : 'prefixItems')}[${index}]`));
    let maxItems = this.count(schema, 'maxItems', at);
    if (rest === false) maxItems = Math.min(maxItems ?? Infinity, prefixItems?.length ?? 0);
    const minItems = this.count(schema, 'minItems', at);
    const items = rest === undefined || rest === true || rest === false ? undefined : this.convert(rest, at(Array.isArray(schema.items) ? 'additionalItems' : 'items'));
    // node-llama-cpp generates every prefix item; a tuple shorter than minItems would not be.
    return { type: 'array', ...(items ? { items } : {}), ...(prefixItems ? { prefixItems } : {}), minItems, maxItems } as GbnfJsonSchema;
  }

  private literals(schema: Record<string, unknown>, keywords: readonly string[], at: (keyword: string) => string): GbnfJsonSchema {
    const keyword = keywords.includes('const') ? 'const' : 'enum';
    const other = keywords.find((name) => name !== keyword && name !== 'type');
    if (other) this.refuse(at(other), `\`${other}\` beside \`${keyword}\` is not supported by the llama-cpp engine's grammar`);
    const values = keyword === 'const' ? [schema.const] : schema.enum;
    if (!Array.isArray(values) || values.length === 0) this.refuse(at('enum'), '`enum` must be a non-empty array');
    const bad = values.find((value) => value !== null && !['string', 'number', 'boolean'].includes(typeof value));
    if (bad !== undefined) this.refuse(at(keyword), `\`${keyword}\` values that are objects or arrays are not supported by the llama-cpp engine's grammar`);
    // A `type` beside the values only narrows them.
    const types = schema.type === undefined ? undefined : this.types(schema, at);
    const kept = types ? values.filter((value) => types.includes(typeOf(value)) || (typeOf(value) === 'integer' && types.includes('number'))) : values;
    if (kept.length === 0) this.refuse(at(keyword), `no \`${keyword}\` value has the schema's \`type\``);
    return kept.length === 1 ? { const: kept[0] } : { enum: kept };
  }

  private reference(ref: unknown, param: string): GbnfJsonSchema {
    if (ref === '#') {
      this.rootReferenced = true;
      return { $ref: `#/$defs/${this.rootName}` } as GbnfJsonSchema;
    }
    const name = typeof ref === 'string' ? this.names.get(ref) : undefined;
    if (name === undefined) this.refuse(param, `\`$ref: ${JSON.stringify(ref)}\` must point to the root (\`#\`) or to a root \`$defs\`/\`definitions\` entry`);
    return { $ref: `#/$defs/${name}` } as GbnfJsonSchema;
  }

  private checkBounds(schema: Record<string, unknown>, at: (keyword: string) => string): void {
    for (const keyword of ['minimum', 'exclusiveMinimum', 'maximum', 'exclusiveMaximum']) {
      const bound = schema[keyword];
      if (bound === undefined) continue;
      const lower = keyword.endsWith('inimum');
      const holds = typeof bound === 'number' && (lower ? bound <= -GRAMMAR_NUMBER_LIMIT : bound >= GRAMMAR_NUMBER_LIMIT);
      if (!holds) this.refuse(at(keyword), `\`${keyword}\` is not supported by the llama-cpp engine's grammar (numbers are unbounded within ±1e15)`);
    }
  }

  private count(schema: Record<string, unknown>, keyword: string, at: (keyword: string) => string): number | undefined {
    const value = schema[keyword];
    if (value === undefined) return undefined;
    if (!Number.isInteger(value) || (value as number) < 0) this.refuse(at(keyword), `\`${keyword}\` must be a non-negative integer`);
    if ((value as number) > GRAMMAR_REPETITION_LIMIT) this.refuse(at(keyword), `\`${keyword}\` above ${GRAMMAR_REPETITION_LIMIT} is not supported by the llama-cpp engine's grammar (llama.cpp's repetition limit)`);
    return value as number;
  }

  private refuse(path: string, message: string): never {
    const param = path ? `${this.param}.${path}` : this.param;
    throw invalidRequestFailure(param, `${message} (at \`${param}\`)`, 'unsupported_parameter');
  }
}

function typeOf(value: unknown): JsonType {
  if (value === null) return 'null';
  if (typeof value === 'number') return Number.isInteger(value) ? 'integer' : 'number';
  return typeof value as JsonType;
}

/** A definition name as a JSON Pointer token (RFC 6901), as `$ref`s spell it. */
function escapePointer(name: string): string {
  return name.replace(/~/g, '~0').replace(/\//g, '~1');
}
