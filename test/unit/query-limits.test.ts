import { buildSchema, parse, specifiedRules, validate } from 'graphql';
import { queryLimitRules } from '../../gateway/graphql/query-limits';

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
