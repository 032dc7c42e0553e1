import { z } from 'zod';
import { EngineFailure } from '../../worker-agent/engines/engine-failure';
import { toGrammarSchema } from '../../worker-agent/llama/grammar-schema';
import { servingGrammar } from '../../worker-agent/llama/llama-grammar';
import { planTools } from '../../worker-agent/llama/llama-tools';

const PARAM = 'response_format.json_schema.schema';

function refusal(schema: unknown): { param: string; message: string } {
  try {
    toGrammarSchema(schema, PARAM);
  } catch (error) {
    expect(error).toBeInstanceOf(EngineFailure);
    const failure = error as EngineFailure;
    expect(failure.engineStatus).toBe(400);
    return JSON.parse(failure.engineBody!.toString()).error;
  }
  throw new Error('expected a refusal');
}

describe('client JSON Schema → node-llama-cpp grammar schema', () => {
  it('reads zod 4 output: $schema, required, additionalProperties false, enums, nullable as type arrays and anyOf, safe-integer bounds', () => {
    const schema = z.toJSONSchema(z.object({ name: z.string().min(1).max(5), count: z.int(), unit: z.enum(['a', 'b']), note: z.string().nullable(), maybe: z.number().nullable() }));
    expect(toGrammarSchema(schema, PARAM)).toEqual({
      type: 'object', additionalProperties: false, minProperties: undefined, maxProperties: undefined,
      properties: {
        name: { type: 'string', minLength: 1, maxLength: 5 },
        count: { type: 'integer' },
        unit: { enum: ['a', 'b'] },
        note: { oneOf: [{ type: 'string', minLength: undefined, maxLength: undefined }, { type: 'null' }] },
        maybe: { oneOf: [{ type: 'number' }, { type: 'null' }] },
      },
    });
    expect(toGrammarSchema({ type: ['string', 'null'] }, PARAM)).toEqual({ oneOf: [{ type: 'string', minLength: undefined, maxLength: undefined }, { type: 'null' }] });
  });

  it('flattens $defs and draft-07 definitions into one $defs, keeps recursion (`$ref: "#"`) and one-schema allOf', () => {
    const Tree: z.ZodType = z.object({ name: z.string(), get children() { return z.array(Tree); } });
    const recursive = toGrammarSchema(z.toJSONSchema(Tree), PARAM) as any;
    expect(recursive.$ref).toBe('#/$defs/__root');
    expect(recursive.$defs.__root.properties.children.items).toEqual({ $ref: '#/$defs/__root' });
    const draft7 = toGrammarSchema({ type: 'object', properties: { a: { allOf: [{ $ref: '#/definitions/A' }], description: 'x' } }, required: ['a'], definitions: { A: { type: 'boolean' } } }, PARAM) as any;
    expect(draft7.properties.a).toEqual({ $ref: '#/$defs/d0' });
    expect(draft7.$defs).toEqual({ d0: { type: 'boolean' } });
  });

  it('reads tuples in both drafts, records, json_object\'s any object and `{}` as any value', () => {
    const tuple = z.tuple([z.string(), z.number()]);
    for (const target of ['draft-2020-12', 'draft-7'] as const) {
      expect(toGrammarSchema(z.toJSONSchema(tuple, { target }), PARAM)).toMatchObject({ type: 'array', prefixItems: [{ type: 'string' }, { type: 'number' }], minItems: 2, maxItems: 2 });
    }
    expect(toGrammarSchema(z.toJSONSchema(z.record(z.string(), z.int())), PARAM)).toMatchObject({ type: 'object', additionalProperties: { type: 'integer' } });
    expect(toGrammarSchema({}, PARAM)).toHaveProperty('oneOf');
  });

  it('refuses every keyword the grammar cannot honour, naming where it is', () => {
    expect(refusal({ type: 'object', properties: { code: { type: 'string', pattern: '^a$' } } })).toMatchObject({ param: `${PARAM}.properties.code.pattern` });
    expect(refusal({ type: 'number', minimum: 0 }).param).toBe(`${PARAM}.minimum`);
    expect(refusal({ type: 'integer', maximum: 10 }).param).toBe(`${PARAM}.maximum`);
    expect(refusal({ type: 'number', multipleOf: 2 }).param).toBe(`${PARAM}.multipleOf`);
    expect(refusal({ type: 'string', format: 'email' }).message).toContain('only date-time, date, time');
    expect(refusal({ type: 'array', items: { type: 'string' }, uniqueItems: true }).param).toBe(`${PARAM}.uniqueItems`);
    expect(refusal({ allOf: [{ type: 'string' }, { type: 'string', maxLength: 2 }] }).param).toBe(`${PARAM}.allOf`);
    expect(refusal({ not: { type: 'string' } }).param).toBe(`${PARAM}.not`);
    expect(refusal({ if: { type: 'string' }, then: {} }).param).toBe(`${PARAM}.if`);
    expect(refusal({ $ref: '#/properties/a' }).param).toBe(`${PARAM}.$ref`);
    expect(refusal({ type: 'object', properties: {}, required: ['ghost'] }).message).toContain('`ghost`');
    expect(refusal({ type: 'object', patternProperties: { '^a': {} } }).param).toBe(`${PARAM}.patternProperties`);
    expect(refusal({ type: 'object', propertyNames: { maxLength: 3 } }).param).toBe(`${PARAM}.propertyNames`);
    expect(refusal({ enum: [{ a: 1 }] }).param).toBe(`${PARAM}.enum`);
    expect(refusal({ type: 'text' }).param).toBe(`${PARAM}.type`);
    expect(refusal(false).param).toBe(PARAM);
    expect(refusal({ type: 'array', minItems: 5000 }).message).toContain('repetition limit');
  });
});

describe('tool-call grammar schema', () => {
  const tool = (name: string, parameters: unknown) => ({ type: 'function', function: { name, parameters } });
  const Place = z.object({ lat: z.number() });
  const weather = tool('get_weather', z.toJSONSchema(z.object({ from: Place, to: Place }), { reused: 'ref' }));

  it('is an array of {name, arguments} per allowed tool; one item without parallel calls; definitions kept apart per tool', () => {
    const plan = planTools({ tools: [weather, tool('noop', undefined)], tool_choice: 'required', parallel_tool_calls: false })!;
    const both = planTools({ tools: [weather, tool('route', weather.function.parameters)], tool_choice: 'required' })!;
    expect(Object.keys(both.schema.$defs!)).toEqual(['t0_d0', 't1_d0']);
    expect(plan.schema).toMatchObject({ type: 'array', minItems: 1, maxItems: 1, items: { oneOf: [
      { type: 'object', properties: { name: { const: 'get_weather' } } },
      { type: 'object', properties: { name: { const: 'noop' }, arguments: { type: 'object', properties: {} } } },
    ] } });
    const named = planTools({ tools: [weather, tool('noop', undefined)], tool_choice: { type: 'function', function: { name: 'noop' } } })!;
    expect(named.schema).toMatchObject({ items: { properties: { name: { const: 'noop' } } } });
    expect(named.schema).not.toHaveProperty('maxItems');
    expect(planTools({ tools: [weather], tool_choice: 'none' })).toBeUndefined();
    expect(planTools({ tools: [weather] })!.choice).toBe('auto');
  });
});

describe('serving grammar', () => {
  // node-llama-cpp 3.22's output for {type: object, properties: {n: {type: number}, i: {type: integer}}}, verbatim.
  const generated = [
    'root ::= "{" whitespace-b-1-4-rule "\\"n\\"" ":" [ ]? fractional-number-rule comma-whitespace-b-1-4-rule "\\"i\\"" ":" [ ]? integer-number-rule whitespace-b-0-4-rule "}" "\\n\\n\\n\\n" [\\n]*',
    'fractional-number-rule ::= "-"? ("0" | [1-9] [0-9]{0,15}) ("." [0-9]{1,16})? ([eE] [-+]? ("0" | [1-9] [0-9]{0,15}))?',
    'comma-whitespace-b-1-4-rule ::= "," ([\\n] ("    " | "\\t") | [ ]?)',
    'integer-number-rule ::= "-"? ("0" | [1-9] [0-9]{0,15}) ([eE] [-+]? ("0" | [1-9] [0-9]{0,15}))?',
    'whitespace-b-1-4-rule ::= [\\n] ("    " | "\\t") | [ ]?',
    'whitespace-b-0-4-rule ::= [\\n] | [ ]?',
  ].join('\n');

  it('ends at the JSON, has no exponents or 16-digit integers, and at most one space between tokens', () => {
    const grammar = servingGrammar(generated);
    expect(grammar).toMatch(/^root ::= .*"}"$/m);
    expect(grammar).not.toContain('[eE]');
    expect(grammar).toContain('integer-number-rule ::= "-"? ("0" | [1-9] [0-9]{0,14})\n');
    expect(grammar).not.toContain('[\\n]');
    expect(grammar).toContain('comma-whitespace-b-1-4-rule ::= "," [ ]?');
  });

  it('for tool_choice auto, also allows plain text that does not start with `[`', () => {
    const grammar = servingGrammar(generated, { orText: true });
    expect(grammar).toMatch(/^json-root ::= /m);
    expect(grammar).toContain('root ::= json-root | plain-text');
  });
});
