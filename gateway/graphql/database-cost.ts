import { isObjectType, type GraphQLField, type GraphQLFieldResolver, type GraphQLObjectType, type GraphQLSchema } from 'graphql';
import { Extensions } from 'type-graphql';

const EXTENSION = 'databaseCost';

/**
 * What one run of a field's resolver costs the database, in rough milliseconds of its time
 * (measured on the bench's workspaces, issue 33). A query's database cost is the sum over its
 * fields, an alias counting as many times as it is written and a field under a list once per
 * item the list may return (query-limits.ts); it is capped per operation and held in the
 * `graphql_cost` budget while the operation runs.
 */
export const DATABASE_WEIGHTS = {
  /** Computed in memory (the catalog, shared models, budgets). */
  memory: 0,
  /** One indexed row or a few: a record by id, a balance, a link to sign. */
  lookup: 1,
  /** One page of a workspace's records by an index (keys, deployments, requests, batches). */
  list: 2,
  /** A range of the ledger, sorted, at most 200 rows. */
  range: 5,
  /**
   * An aggregate over a workspace's rows in a range of up to 366 days (`usage`, `costs`,
   * `sharingEarnings`): 12 ms each on the bench's workspace (450 `usage` aliases ran 5.4 s), and
   * it grows with the workspace.
   */
  aggregate: 25,
} as const;

/** Declares a field's database weight (DATABASE_WEIGHTS) beside its resolver. */
export function DatabaseCost(weight: number): MethodDecorator & PropertyDecorator {
  return Extensions({ [EXTENSION]: weight });
}

/**
 * A field's weight: as declared, else 1 for a root query or mutation (each reads or writes the
 * database unless it says otherwise), else 0 (a plain property of its parent). A new resolver is
 * counted, and limited, without anyone remembering to.
 */
export function databaseCostOf(field: GraphQLField<unknown, unknown>, parent: GraphQLObjectType, schema: GraphQLSchema): number {
  const declared = field.extensions?.[EXTENSION];
  if (typeof declared === 'number') return declared;
  return parent === schema.getQueryType() || parent === schema.getMutationType() ? DATABASE_WEIGHTS.lookup : 0;
}

/**
 * How many of one operation's resolvers may wait on the database at once. graphql-js runs a
 * query's sibling fields in parallel: 450 aliases were 450 queries queued on the 10-connection
 * pool at once, and every other caller waited behind them.
 */
export class QuerySlots {
  private running = 0;
  private readonly waiting: Array<() => void> = [];

  constructor(private readonly size: number) {}

  async run<T>(work: () => T | Promise<T>): Promise<T> {
    if (this.running < this.size) this.running++;
    else await new Promise<void>((resolve) => this.waiting.push(resolve));
    try {
      return await work();
    } finally {
      // The slot passes to the next waiter as it is, so none is taken twice.
      const next = this.waiting.shift();
      if (next) next();
      else this.running--;
    }
  }
}

/**
 * Every field with a database weight resolves inside its operation's QuerySlots (the
 * context's `database`): a weight is what makes a resolver count, and what makes it wait its
 * turn. A context without slots (a caller outside an operation) resolves directly.
 */
export function limitDatabaseQueries(schema: GraphQLSchema): void {
  for (const type of Object.values(schema.getTypeMap())) {
    if (!isObjectType(type) || type.name.startsWith('__') || type === schema.getSubscriptionType()) continue;
    for (const field of Object.values(type.getFields())) {
      const resolve = field.resolve;
      if (!resolve || databaseCostOf(field, type, schema) === 0) continue;
      // The context's `database` (graphql-context.ts, which imports this file's QuerySlots).
      const limited: GraphQLFieldResolver<unknown, { database?: QuerySlots } | undefined> = (source, args, context, info) => {
        const slots = context?.database;
        return slots ? slots.run(() => resolve(source, args, context, info)) : resolve(source, args, context, info);
      };
      field.resolve = limited;
    }
  }
}
