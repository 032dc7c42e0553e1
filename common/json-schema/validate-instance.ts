/**
 * Whether a JSON value satisfies a schema of the subset check-schema.ts accepts: what the CPU
 * engine's answers are held to in tests, and what a client's parser will check.
 */
import { compilePattern } from './schema-pattern';
import { matchesFormat } from './schema-formats';
import { resolveLocalRef } from './schema-refs';
import type { PathSegment } from './schema-path';

export interface InstanceProblem {
  /** Where in the instance, e.g. `['items', 0, 'name']`. */
  readonly path: readonly PathSegment[];
  readonly message: string;
}

/** `$ref` chains that never reach the instance (`{"$ref": "#"}` at the root) end here. */
const MAX_DEPTH = 512;

export function validateInstance(schema: unknown, instance: unknown): InstanceProblem | null {
  return new InstanceValidator(schema).check(schema, instance, [], 0);
}

export function isValidInstance(schema: unknown, instance: unknown): boolean {
  return validateInstance(schema, instance) === null;
}

/** A subschema of `root` (its `$ref`s resolve against `root`). */
export function isValidWithin(root: unknown, schema: unknown, instance: unknown): boolean {
  return new InstanceValidator(root).check(schema, instance, [], 0) === null;
}

export function typeOfValue(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'array';
  if (typeof value === 'number') return Number.isInteger(value) ? 'integer' : 'number';
  return typeof value;
}

export function hasType(value: unknown, type: string): boolean {
  const actual = typeOfValue(value);
  return actual === type || (type === 'number' && actual === 'integer');
}

/** JSON equality, key order aside (enum, const). */
export function jsonEqual(left: unknown, right: unknown): boolean {
  if (left === right) return true;
  if (typeof left !== 'object' || typeof right !== 'object' || left === null || right === null) return false;
  if (Array.isArray(left) !== Array.isArray(right)) return false;
  if (Array.isArray(left)) return left.length === (right as unknown[]).length && left.every((item, index) => jsonEqual(item, (right as unknown[])[index]));
  const leftKeys = Object.keys(left);
  const rightObject = right as Record<string, unknown>;
  return leftKeys.length === Object.keys(rightObject).length
    && leftKeys.every((key) => Object.hasOwn(rightObject, key) && jsonEqual((left as Record<string, unknown>)[key], rightObject[key]));
}

class InstanceValidator {
  constructor(private readonly root: unknown) {}

  check(schema: unknown, value: unknown, path: PathSegment[], depth: number): InstanceProblem | null {
    if (depth > MAX_DEPTH) return { path, message: 'the schema nests too deep to check' };
    if (schema === true || schema === undefined) return null;
    if (schema === false) return { path, message: 'no value is allowed here' };
    const node = schema as Record<string, unknown>;
    const fail = (message: string): InstanceProblem => ({ path, message });
    if (typeof node.$ref === 'string') {
      const problem = this.check(resolveLocalRef(this.root, node.$ref) ?? false, value, path, depth + 1);
      if (problem) return problem;
    }
    if (node.type !== undefined) {
      const types = ([] as unknown[]).concat(node.type) as string[];
      if (!types.some((type) => hasType(value, type))) return fail(`must be ${types.join(' or ')}, got ${typeOfValue(value)}`);
    }
    if (Array.isArray(node.enum) && !node.enum.some((option) => jsonEqual(option, value))) return fail(`must be one of ${JSON.stringify(node.enum)}`);
    if (Object.hasOwn(node, 'const') && !jsonEqual(node.const, value)) return fail(`must be ${JSON.stringify(node.const)}`);
    for (const keyword of ['anyOf', 'oneOf', 'allOf'] as const) {
      const problem = this.combination(keyword, node[keyword], value, path, depth);
      if (problem) return problem;
    }
    if (typeof value === 'string') return this.string(node, value, path);
    if (typeof value === 'number') return this.number(node, value, path);
    if (Array.isArray(value)) return this.array(node, value, path, depth);
    if (typeof value === 'object' && value !== null) return this.object(node, value as Record<string, unknown>, path, depth);
    return null;
  }

  private combination(keyword: 'anyOf' | 'oneOf' | 'allOf', schemas: unknown, value: unknown, path: PathSegment[], depth: number): InstanceProblem | null {
    if (!Array.isArray(schemas)) return null;
    const problems = schemas.map((schema) => this.check(schema, value, path, depth + 1));
    const passed = problems.filter((problem) => problem === null).length;
    if (keyword === 'allOf') return problems.find((problem) => problem !== null) ?? null;
    if (keyword === 'anyOf' && passed === 0) return { path, message: `must match one of the anyOf schemas (${problems[0]?.message})` };
    if (keyword === 'oneOf' && passed !== 1) return { path, message: `must match exactly one of the oneOf schemas, matched ${passed}` };
    return null;
  }

  private string(node: Record<string, unknown>, value: string, path: PathSegment[]): InstanceProblem | null {
    // JSON Schema counts characters as code points.
    const length = [...value].length;
    if (typeof node.minLength === 'number' && length < node.minLength) return { path, message: `must have at least ${node.minLength} characters` };
    if (typeof node.maxLength === 'number' && length > node.maxLength) return { path, message: `must have at most ${node.maxLength} characters` };
    if (typeof node.pattern === 'string' && !compilePattern(node.pattern)?.test(value)) return { path, message: `must match ${node.pattern}` };
    if (typeof node.format === 'string' && !matchesFormat(node.format, value)) return { path, message: `must be a ${node.format}` };
    return null;
  }

  private number(node: Record<string, unknown>, value: number, path: PathSegment[]): InstanceProblem | null {
    const fail = (message: string): InstanceProblem => ({ path, message });
    if (typeof node.minimum === 'number' && value < node.minimum) return fail(`must be >= ${node.minimum}`);
    if (typeof node.maximum === 'number' && value > node.maximum) return fail(`must be <= ${node.maximum}`);
    if (typeof node.exclusiveMinimum === 'number' && value <= node.exclusiveMinimum) return fail(`must be > ${node.exclusiveMinimum}`);
    if (typeof node.exclusiveMaximum === 'number' && value >= node.exclusiveMaximum) return fail(`must be < ${node.exclusiveMaximum}`);
    if (typeof node.multipleOf === 'number') {
      const quotient = value / node.multipleOf;
      if (Math.abs(quotient - Math.round(quotient)) > 1e-9) return fail(`must be a multiple of ${node.multipleOf}`);
    }
    return null;
  }

  private array(node: Record<string, unknown>, value: unknown[], path: PathSegment[], depth: number): InstanceProblem | null {
    if (typeof node.minItems === 'number' && value.length < node.minItems) return { path, message: `must have at least ${node.minItems} items` };
    if (typeof node.maxItems === 'number' && value.length > node.maxItems) return { path, message: `must have at most ${node.maxItems} items` };
    const { tuple, rest } = arrayShape(node);
    for (const [index, item] of value.entries()) {
      const problem = this.check(index < tuple.length ? tuple[index] : rest, item, [...path, index], depth + 1);
      if (problem) return problem;
    }
    return null;
  }

  private object(node: Record<string, unknown>, value: Record<string, unknown>, path: PathSegment[], depth: number): InstanceProblem | null {
    const properties = (node.properties ?? {}) as Record<string, unknown>;
    for (const name of Array.isArray(node.required) ? node.required as string[] : []) {
      if (!Object.hasOwn(value, name)) return { path, message: `must have the property ${JSON.stringify(name)}` };
    }
    for (const [name, item] of Object.entries(value)) {
      if (node.propertyNames !== undefined) {
        const problem = this.check(node.propertyNames, name, [...path, name], depth + 1);
        if (problem) return { path: problem.path, message: `property name ${problem.message}` };
      }
      const known = Object.hasOwn(properties, name);
      if (!known && node.additionalProperties === false) return { path: [...path, name], message: 'is not an allowed property' };
      const problem = this.check(known ? properties[name] : node.additionalProperties, item, [...path, name], depth + 1);
      if (problem) return problem;
    }
    return null;
  }
}

/**
 * Positional schemas and the schema of the items after them: draft 2020-12's `prefixItems` +
 * `items`, or draft-07's array-form `items` + `additionalItems`.
 */
export function arrayShape(node: Record<string, unknown>): { tuple: readonly unknown[]; rest: unknown } {
  if (Array.isArray(node.prefixItems)) return { tuple: node.prefixItems, rest: node.items };
  if (Array.isArray(node.items)) return { tuple: node.items, rest: node.additionalItems };
  return { tuple: [], rest: node.items };
}
