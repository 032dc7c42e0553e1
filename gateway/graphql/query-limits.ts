import {
  getOperationAST, getNamedType, getNullableType, GraphQLError, GraphQLList, isCompositeType, isObjectType, isInterfaceType, Kind,
  type ASTVisitor, type FieldNode, type OperationDefinitionNode, type GraphQLField, type FragmentDefinitionNode, type GraphQLCompositeType, type GraphQLSchema, type SelectionSetNode,
  type DocumentNode, type ValidationContext,
} from 'graphql';
import { databaseCostOf, DATABASE_WEIGHTS } from './database-cost';

export interface QueryLimits {
  /** Deepest selection allowed (fields nested in fields). @default 10 */
  maxDepth: number;
  /** Largest estimated cost: each field 1, times the `limit` of every list above it (see `listSize`). @default 20000 */
  maxComplexity: number;
  /**
   * Largest estimated database cost of one operation: each field its weight (database-cost.ts),
   * times the `limit` of every list above it. @default 200
   */
  maxDatabaseCost: number;
}

export const DEFAULT_QUERY_LIMITS: QueryLimits = { maxDepth: 10, maxComplexity: 20_000, maxDatabaseCost: 200 };
/** What a list field without a `limit` argument is assumed to return. */
const DEFAULT_LIST_SIZE = 10;
/** The largest `limit` any list field accepts (scalingDecisions). */
const MAX_LIST_LIMIT = 500;

interface Walk {
  schema: GraphQLSchema;
  fragments: Map<string, FragmentDefinitionNode>;
  visiting: Set<string>;
}

interface Measure {
  depth: number;
  cost: number;
  databaseCost: number;
}

/**
 * Validation rules that refuse queries too deep or too costly before they run (a console
 * query is a few levels deep; a hostile one nests lists to make the server do the work, or
 * aliases an aggregate hundreds of times to make the database do it).
 * Errors carry `extensions.code` `QUERY_TOO_DEEP` / `QUERY_TOO_COMPLEX`.
 */
export function queryLimitRules(changes: Partial<QueryLimits> = {}) {
  const limits: QueryLimits = { ...DEFAULT_QUERY_LIMITS, ...changes };
  return [(context: ValidationContext): ASTVisitor => ({
    OperationDefinition(operation) {
      const error = queryLimitError(context.getSchema(), context.getDocument(), operation, limits);
      if (error) context.reportError(error);
    },
  })];
}

/** Why `operation` of `document` is refused for its depth, cost or database cost, or null. */
export function queryLimitError(schema: GraphQLSchema, document: DocumentNode, operation: OperationDefinitionNode, limits: QueryLimits): GraphQLError | null {
  const measured = measureOperation(schema, document, operation);
  if (!measured) return null;
  const { depth, cost, databaseCost } = measured;
  if (depth > limits.maxDepth) {
    return new GraphQLError(`query is ${depth} levels deep; the limit is ${limits.maxDepth}`, { nodes: [operation], extensions: { code: 'QUERY_TOO_DEEP' } });
  }
  if (cost > limits.maxComplexity) {
    return new GraphQLError(`query cost ${cost} is over the limit of ${limits.maxComplexity}; ask for fewer items (limit) or fewer nested fields`, {
      nodes: [operation], extensions: { code: 'QUERY_TOO_COMPLEX' },
    });
  }
  if (databaseCost > limits.maxDatabaseCost) {
    const { aggregate, range, list, lookup } = DATABASE_WEIGHTS;
    return new GraphQLError(`query database cost ${databaseCost} is over the limit of ${limits.maxDatabaseCost} per operation `
      + `(usage, costs and sharingEarnings weigh ${aggregate} each, ledgerEntries ${range}, lists ${list}, other reads ${lookup}; every alias counts, `
      + 'and a field under a list once per item); split it into smaller operations', {
      nodes: [operation], extensions: { code: 'QUERY_TOO_COMPLEX' },
    });
  }
  return null;
}

/**
 * The estimated database cost of the operation `operationName` names in `document` (0 when
 * there is none): what it holds of the `graphql_cost` budget while it runs.
 */
export function databaseCostOfOperation(schema: GraphQLSchema, document: DocumentNode, operationName?: string | null): number {
  const operation = getOperationAST(document, operationName);
  return operation ? measureOperation(schema, document, operation)?.databaseCost ?? 0 : 0;
}

function measureOperation(schema: GraphQLSchema, document: DocumentNode, operation: OperationDefinitionNode): Measure | null {
  const root = operation.operation === 'query' ? schema.getQueryType() : operation.operation === 'mutation' ? schema.getMutationType() : schema.getSubscriptionType();
  if (!root) return null;
  const fragments = new Map<string, FragmentDefinitionNode>();
  for (const definition of document.definitions) {
    if (definition.kind === Kind.FRAGMENT_DEFINITION) fragments.set(definition.name.value, definition);
  }
  return measure(operation.selectionSet, root, 1, { schema, fragments, visiting: new Set() });
}

function measure(selectionSet: SelectionSetNode, parent: GraphQLCompositeType, multiplier: number, walk: Walk): Measure {
  let depth = 0;
  let cost = 0;
  let databaseCost = 0;
  for (const selection of selectionSet.selections) {
    if (selection.kind === Kind.FIELD) {
      cost += multiplier;
      const definition = isObjectType(parent) || isInterfaceType(parent) ? parent.getFields()[selection.name.value] : undefined;
      if (definition && isObjectType(parent)) databaseCost += multiplier * databaseCostOf(definition, parent, walk.schema);
      const named = definition ? getNamedType(definition.type) : undefined;
      if (selection.selectionSet && named && isCompositeType(named)) {
        const size = getNullableType(definition!.type) instanceof GraphQLList ? listSize(selection, definition!) : 1;
        const inner = measure(selection.selectionSet, named, multiplier * size, walk);
        depth = Math.max(depth, inner.depth + 1);
        cost += inner.cost;
        databaseCost += inner.databaseCost;
      } else {
        depth = Math.max(depth, 1);
      }
      continue;
    }
    const name = selection.kind === Kind.FRAGMENT_SPREAD ? selection.name.value : null;
    // A fragment that spreads itself is refused by GraphQL's own rules; do not recurse into it.
    if (name && walk.visiting.has(name)) continue;
    const fragment = name ? walk.fragments.get(name) : null;
    const nested = selection.kind === Kind.INLINE_FRAGMENT ? selection.selectionSet : fragment?.selectionSet;
    if (!nested) continue;
    const condition = selection.kind === Kind.INLINE_FRAGMENT ? selection.typeCondition : fragment?.typeCondition;
    const conditionType = condition ? walk.schema.getType(condition.name.value) : parent;
    const type = conditionType && isCompositeType(conditionType) ? conditionType : parent;
    if (name) walk.visiting.add(name);
    const inner = measure(nested, type, multiplier, walk);
    if (name) walk.visiting.delete(name);
    depth = Math.max(depth, inner.depth);
    cost += inner.cost;
    databaseCost += inner.databaseCost;
  }
  return { depth, cost, databaseCost };
}

/**
 * A list returns at most its `limit`: the literal sent, or the argument's default. Variables
 * are not known while a query is validated, so a variable counts as the largest limit any
 * field accepts. A list without a `limit` argument is assumed to hold 10.
 */
function listSize(field: FieldNode, definition: GraphQLField<unknown, unknown>): number {
  const limit = field.arguments?.find((argument) => argument.name.value === 'limit');
  if (limit?.value.kind === Kind.INT) return Math.max(1, Number(limit.value.value));
  if (limit?.value.kind === Kind.VARIABLE) return MAX_LIST_LIMIT;
  const fallback = definition.args.find((argument) => argument.name === 'limit')?.defaultValue;
  return typeof fallback === 'number' ? fallback : DEFAULT_LIST_SIZE;
}
