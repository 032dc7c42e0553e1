import fc from 'fast-check';
import {
  getNamedType, getNullableType, isEnumType, isInputObjectType, isLeafType, isListType, isNonNullType, isObjectType, isInterfaceType,
  type GraphQLField, type GraphQLInputType, type GraphQLNamedType, type GraphQLSchema,
} from 'graphql';
import { operationText, sample } from '../../integration/support/nul-fuzz-cases';
import { anyHostile, DeepValue, hostileNumber, hostileString, objectOf, hostileKey, hostileValue } from './hostile-values';

export type OperationKind = 'query' | 'mutation' | 'subscription';

/** One GraphQL operation as generated: its text and variables, and who sends it. */
export interface GraphQLOperation {
  kind: OperationKind;
  field: string;
  caller: 'owner' | 'operator' | 'guest' | 'none' | 'bad';
  query: string;
  variables?: unknown;
  operationName?: unknown;
}

export interface GraphQLPools {
  /** Ids read-only operations may be given: every object of the fixture (deployments, request records, decoys). */
  readIds: string[];
  /**
   * Ids mutations may be given: decoys only (an external deployment, a second key, a webhook
   * endpoint, a workspace, a static host), so a valid mutation never pauses, deletes or
   * revokes what the other properties call.
   */
  writeIds: string[];
}

/**
 * Operations whose valid call reaches outside the server: verifying a storage credential
 * writes to its bucket (AWS when no endpoint is set). Their arguments are drawn only from
 * values nothing can match, so the fuzz never sends a request to the internet.
 */
const NEVER_VALID_ARGUMENTS: Record<string, Record<string, fc.Arbitrary<unknown>>> = {
  verifyStorageCredential: { id: fc.oneof(fc.integer({ max: 0 }), fc.integer({ min: 1_000_000_000 }), anyHostile) },
};

const UNKNOWN_IDS = ['', 'x', 'dep_000000000000', 'req_000000000000000000000000', 'key_00000000', 'ws_00000000', 'whe_00000000', '00000000-0000-0000-0000-000000000000', '1', '-1', 'shared/meta-llama/Llama-3.1-8B-Instruct', 'shared/'];

const BOUNDARY_INTS = [0, -1, 1, 2, 50, 200, 201, 500, 501, 1000, 2 ** 31 - 1, -(2 ** 31), 2 ** 31, 2 ** 53 - 1, 2 ** 53];
const DATES = ['2025-01-01T00:00:00.000Z', '2025-13-01T00:00:00Z', '2025-01-01', 'yesterday', '', '+275760-09-13T00:00:00.000Z', '-271821-04-20T00:00:00.000Z', '1970-01-01T00:00:00Z', '2025-02-30T00:00:00Z', '0'];
const DECIMALS = ['1', '0.5', '100', '1e3', '-1', 'NaN', 'Infinity', '0.00000000001', '999999999999999999999', '1000000.0000000001', '.5', '5.', ' 5', '0x10'];

const shortText = fc.string({ maxLength: 16 });

function scalarArbitrary(name: string, ids: fc.Arbitrary<string>): fc.Arbitrary<unknown> {
  switch (name) {
    case 'Int':
      return fc.oneof({ arbitrary: fc.integer({ min: -5, max: 600 }), weight: 4 }, { arbitrary: fc.constantFrom(...BOUNDARY_INTS), weight: 2 }, { arbitrary: hostileNumber, weight: 1 });
    case 'SafeInt':
      return fc.oneof({ arbitrary: fc.integer({ min: 1, max: 1_000_000 }), weight: 4 }, { arbitrary: fc.constantFrom(...BOUNDARY_INTS, 2 ** 53 + 2, 1e21), weight: 2 }, { arbitrary: hostileNumber, weight: 1 });
    case 'Float':
      return fc.oneof({ arbitrary: fc.double({ min: 0, max: 100, noNaN: true }), weight: 4 }, { arbitrary: hostileNumber, weight: 2 });
    case 'Boolean':
      return fc.boolean();
    case 'DateTimeISO':
      return fc.oneof(
        { arbitrary: fc.date({ min: new Date('2000-01-01T00:00:00Z'), max: new Date('2100-01-01T00:00:00Z'), noInvalidDate: true }).map((date) => date.toISOString()), weight: 4 },
        { arbitrary: fc.constantFrom(...DATES), weight: 2 },
      );
    case 'Decimal':
      return fc.oneof({ arbitrary: fc.constantFrom(...DECIMALS), weight: 3 }, { arbitrary: fc.double({ min: -10, max: 2_000_000, noNaN: true }), weight: 1 });
    case 'JSONObject':
      return fc.oneof(
        { arbitrary: fc.array(fc.tuple(hostileKey, hostileValue), { maxLength: 5 }).map(objectOf), weight: 2 },
        {
          // Catalog specs with some of their real fields.
          arbitrary: fc.record({
            id: fc.oneof(fc.constant('acme/fuzz-model'), shortText), name: shortText, modality: fc.constantFrom('text', 'image', 'video', 'audio'),
            task: fc.constantFrom('chat', 'completion', 'image-generation', 'x'), engine: fc.constantFrom('vllm', 'diffusers', 'x'), official: fc.boolean(),
            gpuMemoryGb: fc.oneof(fc.integer({ min: 1, max: 80 }), hostileNumber), inputModalities: fc.oneof(fc.constant(['text']), hostileValue),
            sizes: fc.oneof(fc.constant([]), fc.constant(['512x512']), hostileValue), targetConcurrency: fc.oneof(fc.integer({ min: 1, max: 8 }), hostileNumber),
          }, { requiredKeys: [] }),
          weight: 2,
        },
      );
    default:
      // String, ID and any string-like scalar added later.
      return fc.oneof({ arbitrary: ids, weight: 3 }, { arbitrary: shortText, weight: 3 }, { arbitrary: hostileString, weight: 2 });
  }
}

/** Values of `type`: mostly of the right shape (each part valid or not), sometimes null, sometimes anything. */
function valueArbitrary(type: GraphQLInputType, ids: fc.Arbitrary<string>, depth = 0): fc.Arbitrary<unknown> {
  const wrong = anyHostile;
  if (isNonNullType(type)) {
    return fc.oneof({ arbitrary: valueArbitrary(type.ofType, ids, depth), weight: 14 }, { arbitrary: fc.constant(null), weight: 1 });
  }
  const inner = getNullableType(type) as GraphQLInputType;
  let right: fc.Arbitrary<unknown>;
  if (isListType(inner)) {
    const item = valueArbitrary(inner.ofType as GraphQLInputType, ids, depth + 1);
    right = fc.oneof({ arbitrary: fc.array(item, { maxLength: 3 }), weight: 4 }, { arbitrary: item, weight: 1 });
  } else if (isInputObjectType(inner)) {
    const fields = Object.values(inner.getFields());
    if (depth > 4) return fc.constant(sample(inner));
    const entries = fc.tuple(...fields.map((input) => fc.oneof(
      { arbitrary: valueArbitrary(input.type, ids, depth + 1).map((value) => [input.name, value] as [string, unknown]), weight: 6 },
      { arbitrary: fc.constant(null), weight: 1 },
    )));
    right = fc.tuple(entries, fc.oneof({ arbitrary: fc.constant([] as Array<[string, unknown]>), weight: 5 }, { arbitrary: fc.array(fc.tuple(hostileKey, hostileValue), { maxLength: 2 }), weight: 1 }))
      .map(([chosen, extra]) => objectOf([...chosen.filter((entry): entry is [string, unknown] => entry !== null), ...extra]));
  } else if (isEnumType(inner)) {
    right = fc.oneof({ arbitrary: fc.constantFrom(...inner.getValues().map((value) => value.name)), weight: 5 }, { arbitrary: hostileString, weight: 1 });
  } else {
    right = scalarArbitrary((inner as GraphQLNamedType).name, ids);
  }
  return fc.oneof({ arbitrary: right, weight: 10 }, { arbitrary: fc.constant(null), weight: 1 }, { arbitrary: wrong, weight: 2 });
}

/** Leaf fields of an object type that need no arguments. */
function leavesOf(type: GraphQLNamedType): string[] {
  if (!isObjectType(type) && !isInterfaceType(type)) return [];
  return Object.values(type.getFields()).filter((child) => isLeafType(getNamedType(child.type)) && child.args.every((argument) => !isNonNullType(argument.type))).map((child) => child.name);
}

/** Selections of a field's result: __typename, every leaf, leaves of nested objects, or fields that do not exist. */
function selectionsOf(field: GraphQLField<unknown, unknown>): string[] {
  const named = getNamedType(field.type);
  if (isLeafType(named)) return [''];
  const leaves = leavesOf(named);
  const nested = isObjectType(named) ? Object.values(named.getFields())
    .filter((child) => !isLeafType(getNamedType(child.type)) && child.args.every((argument) => !isNonNullType(argument.type)) && leavesOf(getNamedType(child.type)).length > 0)
    .map((child) => `${child.name} { ${leavesOf(getNamedType(child.type)).join(' ')} }`) : [];
  return [
    '{ __typename }',
    ...(leaves.length ? [`{ ${leaves.join(' ')} }`] : []),
    ...(nested.length ? [`{ ${[...leaves, ...nested].join(' ')} }`] : []),
    '{ nope }', '{ __typename ... on Nope { x } }', '{ a: __typename a: __typename }', `{ ${leaves[0] ?? '__typename'}(extra: 1) }`, '{ __typename @skip(if: "yes") }',
  ];
}

/** A value as a GraphQL literal: JSON-like, names bare when they can be, deep values as text. */
export function graphqlLiteral(value: unknown, enumLike = false): string {
  if (value instanceof DeepValue) {
    const array = value.shape !== 'object';
    return `${(array ? '[' : '{a: ').repeat(value.depth)}"x"${(array ? ']' : '}').repeat(value.depth)}`;
  }
  if (value === null || value === undefined) return 'null';
  if (typeof value === 'string') return enumLike && /^[_A-Za-z]\w*$/.test(value) ? value : JSON.stringify(value);
  if (typeof value === 'number' || typeof value === 'boolean') return String(value);
  if (Array.isArray(value)) return `[${value.map((item) => graphqlLiteral(item, enumLike)).join(', ')}]`;
  return `{${Object.entries(value as Record<string, unknown>).map(([key, item]) => `${/^[_A-Za-z]\w*$/.test(key) ? key : JSON.stringify(key)}: ${graphqlLiteral(item, true)}`).join(', ')}}`;
}

const callers = fc.oneof(
  { arbitrary: fc.constant<GraphQLOperation['caller']>('owner'), weight: 12 },
  { arbitrary: fc.constant<GraphQLOperation['caller']>('operator'), weight: 5 },
  { arbitrary: fc.constantFrom<GraphQLOperation['caller']>('guest', 'none', 'bad'), weight: 1 },
);

/**
 * Every operation of the schema (introspected, so new ones are covered without touching the
 * fuzz), each argument a value of its type (valid or not, see valueArbitrary) or of another,
 * passed as variables declared with the argument's own type (the nul fuzz's operationText)
 * or written inline, with one of several selections.
 */
export function operationArbitrary(schema: GraphQLSchema, pools: GraphQLPools, kinds: readonly OperationKind[] = ['query', 'mutation', 'subscription']): fc.Arbitrary<GraphQLOperation> {
  const roots = { query: schema.getQueryType(), mutation: schema.getMutationType(), subscription: schema.getSubscriptionType() };
  const arbitraries: fc.Arbitrary<GraphQLOperation>[] = [];
  for (const kind of kinds) {
    const ids = fc.constantFrom(...(kind === 'mutation' ? pools.writeIds : pools.readIds), ...UNKNOWN_IDS);
    for (const field of Object.values(roots[kind]?.getFields() ?? {})) {
      const overrides = NEVER_VALID_ARGUMENTS[field.name] ?? {};
      const args = fc.tuple(...field.args.map((argument) => fc.oneof(
        { arbitrary: (overrides[argument.name] ?? valueArbitrary(argument.type, ids)).map((value) => [argument.name, value] as const), weight: 8 },
        { arbitrary: fc.constant(null), weight: 1 },
      ))).map((chosen) => objectOf(chosen.filter((entry): entry is readonly [string, unknown] => entry !== null).map(([name, value]) => [name, value])));
      const selection = fc.oneof({ arbitrary: fc.constantFrom(...selectionsOf(field).slice(0, 3)), weight: 6 }, { arbitrary: fc.constantFrom(...selectionsOf(field)), weight: 1 });
      arbitraries.push(fc.record({ args, selection, inline: fc.oneof({ arbitrary: fc.constant(false), weight: 3 }, { arbitrary: fc.constant(true), weight: 1 }), caller: callers })
        .map(({ args: values, selection: chosen, inline, caller }): GraphQLOperation => {
          const named = getNamedType(field.type);
          let query: string;
          if (inline) {
            const call = Object.keys(values).length ? `(${Object.entries(values).map(([name, value]) => `${name}: ${graphqlLiteral(value, isEnumType(getNamedType(field.args.find((argument) => argument.name === name)!.type)))}`).join(', ')})` : '';
            query = `${kind} Fuzz { ${field.name}${call} ${chosen} }`;
          } else {
            // The nul fuzz's operation text (variables declared with each argument's type), with this selection.
            const text = operationText(kind, field, values, false);
            query = isLeafType(named) ? text : text.replace(/ \{ __typename \} \}$/, ` ${chosen} }`);
          }
          return { kind, field: field.name, caller, query, variables: inline ? undefined : values };
        }));
    }
  }
  return fc.oneof(...arbitraries);
}

/** The JSON body of an operation: as JSON.stringify writes it (deep values written out by the caller). */
export function operationBody(operation: GraphQLOperation): Record<string, unknown> {
  return objectOf([['query', operation.query], ...(operation.variables !== undefined ? [['variables', operation.variables] as [string, unknown]] : []),
    ...(operation.operationName !== undefined ? [['operationName', operation.operationName] as [string, unknown]] : [])]);
}
