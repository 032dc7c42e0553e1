/**
 * A value that satisfies a schema of the subset check-schema.ts accepts, made from a random
 * source the caller seeds (the CPU engine seeds it with the request, so the same request gets
 * the same JSON). Choices are tried in a seeded order and each result is held to the schema
 * (validate-instance.ts), so an answer is valid or the schema is refused with the reason,
 * never wrong.
 */
import { MAX_MIN_ITEMS, SCHEMA_TYPES } from './check-schema';
import { FORMAT_SAMPLES } from './schema-formats';
import { compilePattern } from './schema-pattern';
import { resolveLocalRef } from './schema-refs';
import { SampleTooLongError, sampleRegex } from './regex-sample';
import { arrayShape, isValidWithin } from './validate-instance';

/** No value could be made: the schema is unsatisfiable, or recursive with no way to end. */
export class SchemaGenerationError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'SchemaGenerationError';
  }
}

/** Beyond this nesting, optional parts are left out and the shortest choices preferred, so recursive schemas end. */
const SHALLOW_DEPTH = 4;
const MAX_DEPTH = 48;
const PATTERN_TRIES = 24;
/**
 * Values made (tries included) and characters of strings, per instance: nested `minItems` and
 * `minLength` multiply, and the CPU engine makes instances on the agent's event loop, so a
 * schema that needs more is refused rather than allowed to hold the agent.
 */
const MAX_VALUES = 50_000;
const MAX_CHARACTERS = 1_000_000;
const WORDS = [
  'alpha', 'blue', 'river', 'stone', 'quiet', 'north', 'maple', 'copper', 'delta', 'orbit', 'harbor', 'lumen',
  'cedar', 'pixel', 'amber', 'falcon', 'meadow', 'signal', 'vector', 'willow', 'ember', 'summit', 'tide', 'cobalt',
];

type Node = Record<string, unknown>;

export function generateInstance(schema: unknown, random: () => number): unknown {
  const value = new InstanceGenerator(schema, random).make(schema, 0);
  if (!isValidWithin(schema, schema, value)) throw new SchemaGenerationError('no value satisfying the schema could be made');
  return value;
}

class InstanceGenerator {
  private values = 0;
  private characters = 0;

  constructor(private readonly root: unknown, private readonly random: () => number) {}

  make(schema: unknown, depth: number): unknown {
    if (depth > MAX_DEPTH) throw new SchemaGenerationError(`the schema nests deeper than ${MAX_DEPTH} levels with no way to end`);
    if (++this.values > MAX_VALUES) throw new SchemaGenerationError(`the schema needs more than ${MAX_VALUES} values to satisfy`);
    if (schema === false) throw new SchemaGenerationError('a subschema allows no value');
    if (schema === true || schema === undefined) return this.word();
    const node = schema as Node;
    if (typeof node.$ref === 'string') {
      const { $ref, ...rest } = node;
      return this.held(node, () => this.make(mergeSchemas(resolveLocalRef(this.root, $ref) ?? false, rest), depth + 1));
    }
    if (Array.isArray(node.allOf)) {
      const { allOf, ...rest } = node;
      return this.held(node, () => this.make(allOf.reduce((merged: unknown, part) => mergeSchemas(merged, part), rest), depth + 1));
    }
    if (Object.hasOwn(node, 'const')) return node.const;
    if (Array.isArray(node.enum)) {
      const { enum: options, ...rest } = node;
      const allowed = options.filter((option) => isValidWithin(this.root, rest, option));
      if (allowed.length === 0) throw new SchemaGenerationError('no enum value satisfies the rest of its schema');
      return allowed[Math.floor(this.random() * allowed.length)];
    }
    for (const keyword of ['anyOf', 'oneOf'] as const) {
      const branches = node[keyword];
      if (!Array.isArray(branches)) continue;
      const { [keyword]: _omitted, ...rest } = node;
      return this.firstValid(node, this.order(branches, depth, branchCost), (branch) => this.make(mergeSchemas(rest, branch), depth + 1));
    }
    const types = typesOf(node);
    return this.firstValid(node, this.order(types, depth, typeCost), (type) => this.ofType(type, node, depth));
  }

  /** `make` for a node whose parts were merged: the result must satisfy the node itself. */
  private held(node: Node, make: () => unknown): unknown {
    const value = make();
    if (!isValidWithin(this.root, node, value)) throw new SchemaGenerationError('the parts of an allOf or $ref contradict each other');
    return value;
  }

  /** The first option whose value satisfies `node`; each option tried once. */
  private firstValid<T>(node: Node, options: readonly T[], make: (option: T) => unknown): unknown {
    let last: unknown = new SchemaGenerationError('no option of the schema could be satisfied');
    for (const option of options) {
      try {
        const value = make(option);
        if (isValidWithin(this.root, node, value)) return value;
      } catch (error) {
        last = error;
      }
    }
    throw last;
  }

  /** A seeded rotation of the options; deep in a schema, the cheapest first so recursion ends. */
  private order<T>(options: readonly T[], depth: number, cost: (option: T) => number): T[] {
    const start = Math.floor(this.random() * options.length);
    const rotated = options.map((_, index) => options[(start + index) % options.length]);
    return depth >= SHALLOW_DEPTH ? rotated.sort((left, right) => cost(left) - cost(right)) : rotated;
  }

  private ofType(type: string, node: Node, depth: number): unknown {
    switch (type) {
      case 'null': return null;
      case 'boolean': return this.random() < 0.5;
      case 'integer': return this.number(node, true);
      case 'number': return this.number(node, false);
      case 'string': return this.string(node);
      case 'array': return this.array(node, depth);
      default: return this.object(node, depth);
    }
  }

  private object(node: Node, depth: number): Record<string, unknown> {
    const properties = (node.properties ?? {}) as Record<string, unknown>;
    const required = new Set(Array.isArray(node.required) ? node.required as string[] : []);
    const value: Record<string, unknown> = {};
    for (const [name, schema] of Object.entries(properties)) {
      if (required.has(name) || depth < SHALLOW_DEPTH) value[name] = this.make(schema, depth + 1);
    }
    for (const name of required) {
      if (!Object.hasOwn(value, name)) value[name] = this.make(node.additionalProperties, depth + 1);
    }
    // A record (`additionalProperties` a schema, no named properties) gets one entry, so it shows its value's shape.
    const extra = node.additionalProperties;
    if (Object.keys(properties).length === 0 && extra !== undefined && typeof extra !== 'boolean' && depth < SHALLOW_DEPTH) {
      const key = this.make({ type: 'string', ...(node.propertyNames as Node | undefined) }, depth + 1);
      if (typeof key === 'string' && !Object.hasOwn(value, key)) value[key] = this.make(extra, depth + 1);
    }
    return value;
  }

  private array(node: Node, depth: number): unknown[] {
    const { tuple, rest } = arrayShape(node);
    const minItems = Math.min(typeof node.minItems === 'number' ? node.minItems : 0, MAX_MIN_ITEMS);
    const maxItems = typeof node.maxItems === 'number' ? node.maxItems : Infinity;
    const wanted = depth < SHALLOW_DEPTH ? Math.max(minItems, tuple.length, 1 + Math.floor(this.random() * 2)) : Math.max(minItems, tuple.length);
    const length = Math.min(wanted, maxItems, rest === false ? tuple.length : Infinity);
    return Array.from({ length }, (_, index) => this.make(index < tuple.length ? tuple[index] : rest, depth + 1));
  }

  private number(node: Node, integer: boolean): number {
    const step = typeof node.multipleOf === 'number' ? node.multipleOf : integer ? 1 : 0;
    let low = typeof node.minimum === 'number' ? node.minimum : -Infinity;
    let high = typeof node.maximum === 'number' ? node.maximum : Infinity;
    const margin = step > 0 ? step : 0.01;
    if (typeof node.exclusiveMinimum === 'number') low = Math.max(low, node.exclusiveMinimum + margin);
    if (typeof node.exclusiveMaximum === 'number') high = Math.min(high, node.exclusiveMaximum - margin);
    // Unbounded or vast ranges (zod's int is [-2^53+1, 2^53-1]) give small, ordinary numbers.
    if (low === -Infinity && high === Infinity) [low, high] = [0, 100];
    else if (low === -Infinity) low = high - 100;
    else if (high === Infinity || high - low > 1_000) high = low + 100;
    if (low > 0 && high - low > 1_000) high = low + 100;
    if (step > 0) {
      const first = Math.ceil(low / step);
      const last = Math.floor(high / step);
      if (first > last) throw new SchemaGenerationError('no number satisfies the bounds and multipleOf');
      const multiple = first + Math.floor(this.random() * (last - first + 1));
      return Number((multiple * step).toPrecision(15));
    }
    if (low > high) throw new SchemaGenerationError('no number satisfies the bounds');
    const value = Math.round((low + this.random() * (high - low)) * 100) / 100;
    return Math.min(high, Math.max(low, value));
  }

  private string(node: Node): string {
    const text = this.stringOf(node);
    this.characters += text.length;
    if (this.characters > MAX_CHARACTERS) throw new SchemaGenerationError(`the schema needs more than ${MAX_CHARACTERS} characters of strings to satisfy`);
    return text;
  }

  private stringOf(node: Node): string {
    const minLength = typeof node.minLength === 'number' ? node.minLength : 0;
    const maxLength = typeof node.maxLength === 'number' ? node.maxLength : Infinity;
    const fits = (text: string) => {
      const length = [...text].length;
      return length >= minLength && length <= maxLength && (typeof node.pattern !== 'string' || compilePattern(node.pattern)?.test(text) === true);
    };
    const samples = typeof node.format === 'string' ? FORMAT_SAMPLES[node.format] ?? [] : [];
    const fromFormat = this.order(samples, 0, () => 0).find(fits);
    if (fromFormat !== undefined) return fromFormat;
    if (typeof node.pattern === 'string') {
      for (let attempt = 0; attempt < PATTERN_TRIES; attempt += 1) {
        let text: string;
        try {
          text = sampleRegex(node.pattern, this.random);
        } catch (error) {
          if (error instanceof SampleTooLongError) throw new SchemaGenerationError(error.message);
          throw error;
        }
        if (fits(text)) return text;
      }
      throw new SchemaGenerationError(`no string matching the pattern ${JSON.stringify(node.pattern)} within the length bounds could be made`);
    }
    let text = this.word();
    while (text.length < minLength) text += ` ${this.word()}`;
    if (text.length > maxLength) text = text.slice(0, maxLength).trimEnd().padEnd(Math.min(maxLength, Math.max(minLength, 1)), 'x');
    return text.slice(0, maxLength);
  }

  private word(): string {
    const count = 1 + Math.floor(this.random() * 2);
    return Array.from({ length: count }, () => WORDS[Math.floor(this.random() * WORDS.length)]).join(' ');
  }
}

/** The types a node allows: its `type`, or what its keywords imply (`properties` → object). */
function typesOf(node: Node): string[] {
  if (node.type !== undefined) return ([] as string[]).concat(node.type as string | string[]);
  if (node.properties !== undefined || node.required !== undefined || node.additionalProperties !== undefined || node.propertyNames !== undefined) return ['object'];
  if (node.items !== undefined || node.prefixItems !== undefined || node.minItems !== undefined || node.maxItems !== undefined) return ['array'];
  if (['minimum', 'maximum', 'exclusiveMinimum', 'exclusiveMaximum', 'multipleOf'].some((keyword) => node[keyword] !== undefined)) return ['number'];
  if (node.minLength !== undefined || node.maxLength !== undefined || node.pattern !== undefined || node.format !== undefined) return ['string'];
  return [...SCHEMA_TYPES].filter((type) => type !== 'integer');
}

const TYPE_COST: Readonly<Record<string, number>> = { null: 0, boolean: 1, integer: 2, number: 2, string: 3, array: 4, object: 5 };

function typeCost(type: string): number {
  return TYPE_COST[type] ?? 6;
}

function branchCost(branch: unknown): number {
  if (typeof branch !== 'object' || branch === null) return 6;
  const node = branch as Node;
  if (node.$ref !== undefined) return 7;
  return node.type === undefined ? 6 : Math.min(...typesOf(node).map(typeCost));
}

/**
 * Both schemas' constraints in one node, for allOf and `$ref` siblings: properties and
 * `required` are united, a property in both gets an allOf of both; other keywords of `extra`
 * win, and the result is held to the original node anyway.
 */
function mergeSchemas(base: unknown, extra: unknown): unknown {
  if (base === true || base === undefined) return extra;
  if (extra === true || extra === undefined) return base;
  if (base === false || extra === false) return false;
  const left = base as Node;
  const right = extra as Node;
  const merged: Node = { ...left, ...right };
  if (left.properties && right.properties) {
    const properties: Node = { ...(left.properties as Node) };
    for (const [name, schema] of Object.entries(right.properties as Node)) {
      properties[name] = Object.hasOwn(properties, name) ? { allOf: [properties[name], schema] } : schema;
    }
    merged.properties = properties;
  }
  if (Array.isArray(left.required) && Array.isArray(right.required)) merged.required = [...new Set([...left.required, ...right.required])];
  if (left.type !== undefined && right.type !== undefined) {
    const rightTypes = ([] as unknown[]).concat(right.type);
    const common = ([] as unknown[]).concat(left.type).filter((type) => rightTypes.includes(type) || (type === 'integer' && rightTypes.includes('number')));
    merged.type = common.length === 0 ? rightTypes : common;
  }
  return merged;
}
