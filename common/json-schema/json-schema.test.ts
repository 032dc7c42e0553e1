import fc from 'fast-check';
import { z } from 'zod';
import { zodFunction, zodResponseFormat } from 'openai/helpers/zod';
import { toJsonSchema } from '@langchain/core/utils/json_schema';
import { checkJsonSchema, generateInstance, isValidInstance, SchemaGenerationError, validateInstance } from './index';
import { formatPath } from './schema-path';
import { sampleRegex } from './regex-sample';
import { seededRandom } from '../seeded-random';


const Item = z.object({ name: z.string().min(1).max(20), qty: z.number().int().min(0), tags: z.array(z.string()).max(3) });
const Order = z.object({
  title: z.string(),
  kind: z.enum(['a', 'b']),
  email: z.string().email(),
  when: z.string().datetime(),
  id: z.string().uuid(),
  nick: z.string().nullable(),
  items: z.array(Item),
  lit: z.literal('x'),
  either: z.union([z.string(), z.number()]),
  shape: z.discriminatedUnion('t', [z.object({ t: z.literal('p'), v: z.number() }), z.object({ t: z.literal('q') })]),
  code: z.string().regex(/^[A-Z]{3}-\d{2}$/),
  both: Item.and(z.object({ extra: z.boolean() })),
  withDefault: z.number().default(3),
});
// Shapes strict structured outputs refuse but tool parameters of LangChain and the AI SDK carry.
const Loose = Order.extend({ pair: z.tuple([z.string(), z.number()]), counts: z.record(z.string(), z.number()), note: z.string().optional() });
interface Tree { label: string; children: Tree[] }
const TreeSchema: z.ZodType<Tree> = z.lazy(() => z.object({ label: z.string(), children: z.array(TreeSchema) }));

async function clientSchemas(): Promise<[string, unknown, z.ZodType][]> {
  return [
    ['openai zodResponseFormat', zodResponseFormat(Order, 'order').json_schema.schema, Order],
    ['openai zodFunction', zodFunction({ name: 'add_item', parameters: Item }).function.parameters, Item],
    ['LangChain toJsonSchema', toJsonSchema(Loose), Loose],
    // The AI SDK's zodSchema() is zod 4's toJSONSchema at draft-07 (its package is ES modules only, which jest's runtime cannot require).
    ['zod 4 toJSONSchema draft-7 (as the AI SDK sends)', z.toJSONSchema(Loose, { target: 'draft-7' }), Loose],
    ['zod 4 toJSONSchema, recursive ($defs/$ref)', z.toJSONSchema(z.object({ root: TreeSchema })), z.object({ root: TreeSchema })],
  ];
}

describe('checkJsonSchema', () => {
  it('accepts the schemas the openai SDK, LangChain, the AI SDK and zod send', async () => {
    for (const [, schema] of await clientSchemas()) expect(checkJsonSchema(schema)).toBeNull();
  });

  it.each([
    [{ type: 'object', properties: { a: { type: 'string', if: {} } } }, 'properties.a.if', 'if'],
    [{ type: 'object', patternProperties: { '^x': {} } }, 'patternProperties', 'patternProperties'],
    [{ type: 'array', items: { type: 'string' }, uniqueItems: true }, 'uniqueItems', 'uniqueItems'],
    [{ anyOf: [{ type: 'string' }, { not: { type: 'null' } }] }, 'anyOf[1].not', 'not'],
    [{ $defs: { A: { type: 'object', minProperties: 1 } } }, '$defs.A.minProperties', 'minProperties'],
  ])('refuses an unsupported keyword, naming it and its path: %j', (schema, path, keyword) => {
    const problem = checkJsonSchema(schema)!;
    expect(formatPath('', problem.path)).toBe(path);
    expect(problem.message).toContain(JSON.stringify(keyword));
  });

  it.each([
    [[1, 2], '', 'JSON Schema object'],
    [{ type: 'text' }, 'type', 'must be one of'],
    [{ type: ['string', 'string'] }, 'type', 'distinct'],
    [{ properties: [] }, 'properties', 'object of schemas'],
    [{ properties: { a: 5 } }, 'properties.a', 'JSON Schema'],
    [{ required: 'a' }, 'required', 'property names'],
    [{ anyOf: [] }, 'anyOf', 'non-empty'],
    [{ enum: [] }, 'enum', 'non-empty'],
    [{ minLength: -1 }, 'minLength', 'non-negative'],
    [{ minItems: 1_000_000 }, 'minItems', 'not supported'],
    [{ maximum: '5' }, 'maximum', 'number'],
    [{ multipleOf: 0 }, 'multipleOf', 'above 0'],
    [{ pattern: '([a-z' }, 'pattern', 'regular expression'],
    [{ $ref: 'https://example.com/schema.json' }, '$ref', 'point into this schema'],
    [{ $ref: '#/$defs/Missing' }, '$ref', 'point into this schema'],
    [{ required: ['a'], $ref: '#/required' }, '$ref', 'does not point at a schema'],
    [{ description: 5 }, 'description', 'string'],
  ])('refuses %j at %s', (schema, path, message) => {
    const problem = checkJsonSchema(schema)!;
    expect(problem).not.toBeNull();
    expect(formatPath('', problem.path)).toBe(path);
    expect(problem.message).toContain(message);
  });

  it('names paths under a prefix as request fields', () => {
    expect(formatPath('tools[0].function.parameters', ['properties', 'a', 'anyOf', 1, 'if'])).toBe('tools[0].function.parameters.properties.a.anyOf[1].if');
  });
});

describe('validateInstance', () => {
  const schema = zodResponseFormat(Item, 'item').json_schema.schema;

  it('accepts a valid instance and names the first problem of an invalid one', () => {
    expect(validateInstance(schema, { name: 'a', qty: 1, tags: [] })).toBeNull();
    expect(validateInstance(schema, { name: '', qty: 1, tags: [] })).toEqual({ path: ['name'], message: 'must have at least 1 characters' });
    expect(validateInstance(schema, { name: 'a', qty: 1.5, tags: [] })?.path).toEqual(['qty']);
    expect(validateInstance(schema, { name: 'a', qty: 1, tags: ['a', 'b', 'c', 'd'] })?.path).toEqual(['tags']);
    expect(validateInstance(schema, { name: 'a', qty: 1 })?.message).toContain('"tags"');
    expect(validateInstance(schema, { name: 'a', qty: 1, tags: [], more: 1 })?.path).toEqual(['more']);
  });

  it('checks formats, patterns, oneOf, tuples and local refs', () => {
    expect(isValidInstance({ type: 'string', format: 'date-time' }, '2024-01-02T03:04:05Z')).toBe(true);
    expect(isValidInstance({ type: 'string', format: 'date-time' }, 'yesterday')).toBe(false);
    expect(isValidInstance({ type: 'string', pattern: '^a+$' }, 'aab')).toBe(false);
    expect(isValidInstance({ oneOf: [{ type: 'number' }, { type: 'integer' }] }, 3)).toBe(false);
    expect(isValidInstance({ type: 'array', prefixItems: [{ type: 'string' }], items: false }, ['a', 1])).toBe(false);
    expect(isValidInstance({ type: 'array', items: [{ type: 'string' }], additionalItems: false }, ['a'])).toBe(true);
    expect(isValidInstance({ $defs: { N: { type: ['integer', 'null'] } }, $ref: '#/$defs/N' }, null)).toBe(true);
    expect(isValidInstance({ $defs: { N: { type: ['integer', 'null'] } }, $ref: '#/$defs/N' }, 'x')).toBe(false);
  });
});

describe('generateInstance', () => {
  it('makes values the clients\' own zod schemas parse', async () => {
    for (const [name, schema, zodType] of await clientSchemas()) {
      for (let seed = 0; seed < 40; seed += 1) {
        const value = generateInstance(schema, seededRandom(seed));
        expect({ name, problem: validateInstance(schema, value) }).toEqual({ name, problem: null });
        expect({ name, success: zodType.safeParse(value).success }).toEqual({ name, success: true });
      }
    }
  });

  it('is deterministic for a seed and varies across seeds', async () => {
    const schema = zodResponseFormat(Order, 'order').json_schema.schema;
    expect(generateInstance(schema, seededRandom(7))).toEqual(generateInstance(schema, seededRandom(7)));
    const values = new Set(Array.from({ length: 10 }, (_, seed) => JSON.stringify(generateInstance(schema, seededRandom(seed)))));
    expect(values.size).toBeGreaterThan(1);
  });

  it('refuses unsatisfiable schemas with the reason', () => {
    expect(() => generateInstance({ type: 'integer', minimum: 5, maximum: 4 }, seededRandom(1))).toThrow(SchemaGenerationError);
    expect(() => generateInstance({ type: 'string', enum: [1, 2] }, seededRandom(1))).toThrow('enum');
    expect(() => generateInstance({ type: 'object', properties: { a: { $ref: '#' } }, required: ['a'] }, seededRandom(1))).toThrow('deeper');
    const wide = { type: 'array', minItems: 1024, items: { type: 'array', minItems: 1024, items: { type: 'integer' } } };
    expect(() => generateInstance(wide, seededRandom(1))).toThrow('more than 50000 values');
    const long = { type: 'array', minItems: 100, items: { type: 'string', minLength: 60_000 } };
    expect(() => generateInstance(long, seededRandom(1))).toThrow('characters');
    expect(() => generateInstance({ type: 'string', pattern: '^((a{1000}){1000}){1000}$' }, seededRandom(1))).toThrow('exceed');
  });

  it('samples strings that match common patterns', () => {
    for (const pattern of ['^[A-Z]{3}-\\d{2}$', '^(foo|bar)[0-9]+$', '^\\w+@\\w+\\.com$', '^[^\\s]{4,8}$', '^\\u0041\\x42?c*$']) {
      for (let seed = 0; seed < 20; seed += 1) expect(new RegExp(pattern, 'u').test(sampleRegex(pattern, seededRandom(seed)))).toBe(true);
    }
  });
});

const PATTERNS = ['^[A-Z]{3}-\\d{2}$', '^[a-z]+$', '^(red|green|blue)(-\\d)?$', '^[0-9a-f]{8}$'];

const leafSchema = fc.oneof(
  fc.record({ type: fc.constant('string'), minLength: fc.nat(5), extra: fc.nat(10) })
    .map(({ minLength, extra }) => ({ type: 'string', minLength, maxLength: minLength + extra })),
  fc.record({ type: fc.constant('string'), pattern: fc.constantFrom(...PATTERNS) }),
  fc.record({ type: fc.constant('string'), format: fc.constantFrom('date-time', 'date', 'email', 'uuid', 'ipv4', 'uri') }),
  fc.record({ type: fc.constantFrom('integer', 'number'), minimum: fc.integer({ min: -1000, max: 1000 }), width: fc.nat(2000) })
    .map(({ type, minimum, width }) => ({ type, minimum, maximum: minimum + width })),
  fc.record({ type: fc.constant('integer'), multipleOf: fc.integer({ min: 1, max: 7 }), exclusiveMinimum: fc.integer({ min: -50, max: 50 }) }),
  fc.record({ type: fc.constant('number'), exclusiveMinimum: fc.constant(0), exclusiveMaximum: fc.constant(1) }),
  fc.constant({ type: 'boolean' }),
  fc.constant({ type: 'null' }),
  fc.constant({}),
  fc.array(fc.oneof(fc.string(), fc.integer(), fc.boolean(), fc.constant(null)), { minLength: 1, maxLength: 4 }).map((options) => ({ enum: options })),
  fc.jsonValue({ maxDepth: 2 }).map((value) => ({ const: value })),
);

const { schema: anySchema } = fc.letrec<{ schema: unknown }>((tie) => ({
  schema: fc.oneof({ maxDepth: 4, depthIdentifier: 'schema' },
    leafSchema,
    fc.dictionary(fc.stringMatching(/^[a-z]{1,6}$/), tie('schema'), { maxKeys: 4 }).chain((properties) =>
      fc.subarray(Object.keys(properties)).map((required) => ({ type: 'object', properties, required, additionalProperties: false }))),
    fc.record({ items: tie('schema'), minItems: fc.nat(3), extra: fc.nat(3) })
      .map(({ items, minItems, extra }) => ({ type: 'array', items, minItems, maxItems: minItems + extra })),
    fc.array(tie('schema'), { minLength: 1, maxLength: 3 }).map((anyOf) => ({ anyOf })),
    // Refs resolve against the document's root, where the property below puts $defs.Inner.
    fc.constant({ $ref: '#/$defs/Inner' }),
    leafSchema.filter((schema) => typeof (schema as { type?: unknown }).type === 'string' && (schema as { type: string }).type !== 'null')
      .map((schema) => ({ ...schema, type: [(schema as { type: string }).type, 'null'] })),
  ),
}));

describe('generateInstance (property)', () => {
  it('always makes an instance that validates, for any schema of the subset', () => {
    fc.assert(fc.property(anySchema, leafSchema, fc.integer(), (schema, inner, seed) => {
      const root = { $defs: { Inner: { type: 'object', properties: { leaf: inner }, required: ['leaf'] } }, type: 'object', properties: { value: schema }, required: ['value'] };
      expect(checkJsonSchema(root)).toBeNull();
      const value = generateInstance(root, seededRandom(seed));
      expect(validateInstance(root, value)).toBeNull();
    }), { numRuns: 500 });
  });
});
