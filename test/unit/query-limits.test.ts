import { buildSchema, parse, specifiedRules, validate } from 'graphql';
import { buildGatewaySchema } from '../../gateway/graphql/build-schema';
import { DATABASE_WEIGHTS, QuerySlots } from '../../gateway/graphql/database-cost';
import { databaseCostOfOperation, queryLimitRules } from '../../gateway/graphql/query-limits';

/** A self-referencing schema, the shape a hostile query abuses. */
const schema = buildSchema(`
  type Node { id: ID, child: Node, children(limit: Int): [Node] }
  type Query { node: Node, nodes(limit: Int): [Node], pages(limit: Int = 100): [Node] }
`);
const check = (query: string) => validate(schema, parse(query), [...specifiedRules, ...queryLimitRules({ maxDepth: 4, maxComplexity: 500 })])
  .map((error) => error.extensions.code);

describe('GraphQL query limits', () => {
  it('refuses a query nested deeper than the limit, fragments included', () => {
    expect(check('{ node { child { child { id } } } }')).toEqual([]);
    expect(check('{ node { child { child { child { child { id } } } } } }')).toEqual(['QUERY_TOO_DEEP']);
    expect(check('{ node { ...A } } fragment A on Node { child { child { child { child { id } } } } }')).toEqual(['QUERY_TOO_DEEP']);
  });

  it('refuses a query whose nested lists multiply past the cost limit, counting limit arguments', () => {
    expect(check('{ nodes(limit: 5) { id children(limit: 5) { id } } }')).toEqual([]);
    expect(check('{ nodes(limit: 50) { id children(limit: 50) { id } } }')).toEqual(['QUERY_TOO_COMPLEX']);
    expect(check('{ nodes { children { children { id } } } }')).toEqual(['QUERY_TOO_COMPLEX']);
  });

  it('counts a limit sent as a variable at the largest any field accepts, and a missing limit at its default', () => {
    expect(check('query($n: Int) { nodes(limit: $n) { id } }')).toEqual(['QUERY_TOO_COMPLEX']);
    expect(check('{ pages { id } }')).toEqual([]);
    expect(check('{ pages { id child { id } } }')).toEqual([]);
    expect(check('{ pages { id child { id child { id } } } }')).toEqual(['QUERY_TOO_COMPLEX']);
  });
});

describe('GraphQL database cost', () => {
  const gateway = buildGatewaySchema();
  const range = 'from: "2026-01-01T00:00:00Z", to: "2026-02-01T00:00:00Z"';
  const costOf = (query: string) => databaseCostOfOperation(gateway, parse(query));
  const refusals = (query: string) => validate(gateway, parse(query), [...specifiedRules, ...queryLimitRules({ maxDatabaseCost: 200 })])
    .map((error) => error.extensions.code);

  it('weighs aggregates, lists, lookups and in-memory fields; every alias counts', () => {
    expect(costOf(`{ usage(${range}) { key } }`)).toBe(DATABASE_WEIGHTS.aggregate);
    expect(costOf(`{ a: usage(${range}) { key } b: costs(${range}) { key } c: sharingEarnings(${range}) { key } ledgerEntries(${range}) { kind } creditBalance }`))
      .toBe(3 * DATABASE_WEIGHTS.aggregate + DATABASE_WEIGHTS.range + DATABASE_WEIGHTS.lookup);
    expect(costOf('{ catalog { id } sharedModels { id } budgets { budget } __typename }')).toBe(0);
    expect(costOf('{ apiKeys { id } deployment(id: "d") { id } }')).toBe(DATABASE_WEIGHTS.list + DATABASE_WEIGHTS.lookup);
  });

  it('counts a field under a list once per item the list may return, fragments included', () => {
    // The console's batch list: 2 + 50 × 3 signed links.
    expect(costOf('{ batches(limit: 50) { id inputFileUrl outputFileUrl errorFileUrl } }')).toBe(152);
    expect(costOf('{ deployments { ...D } } fragment D on Deployment { replicas { id } }')).toBe(2 + 10);
    expect(refusals('{ batches(limit: 100) { inputFileUrl outputFileUrl errorFileUrl } }')).toEqual(['QUERY_TOO_COMPLEX']);
  });

  it('refuses an operation over the limit before it runs: 8 `usage` aliases pass, 9 do not', () => {
    const aliases = (count: number) => `{ ${Array.from({ length: count }, (_, index) => `u${index}: usage(${range}) { key }`).join(' ')} }`;
    expect(refusals(aliases(8))).toEqual([]);
    expect(refusals(aliases(9))).toEqual(['QUERY_TOO_COMPLEX']);
  });
});

describe('QuerySlots', () => {
  it('runs at most its size at once, in the order they came, and passes a failure on without losing a slot', async () => {
    const slots = new QuerySlots(2);
    let running = 0;
    let most = 0;
    const started: number[] = [];
    const task = (index: number) => slots.run(async () => {
      started.push(index);
      most = Math.max(most, ++running);
      await new Promise((resolve) => setTimeout(resolve, 5));
      running--;
      if (index === 2) throw new Error('boom');
      return index;
    });
    const results = await Promise.allSettled([0, 1, 2, 3, 4, 5].map(task));
    expect(most).toBe(2);
    expect(started).toEqual([0, 1, 2, 3, 4, 5]);
    expect(results.map((result) => result.status)).toEqual(['fulfilled', 'fulfilled', 'rejected', 'fulfilled', 'fulfilled', 'fulfilled']);
    expect(await slots.run(() => 'again')).toBe('again');
  });
});
