import { createHash } from 'node:crypto';
import { GraphQLError, Kind, parse, type GraphQLSchema } from 'graphql';
import { queryLimitError, type QueryLimits } from './query-limits';

/** Verdicts kept: a flood of distinct documents starts the memory over instead of growing it. */
const MAX_VERDICTS = 1_000;
/** Characters up to which a document is its own key. */
const SHORT_DOCUMENT = 2_048;

/**
 * A document over the depth, complexity or database-cost limits is refused before graphql-js
 * validates it: the limits are one walk of the parsed document (~1 ms for 450 `usage` aliases),
 * where graphql-js's own rules took 40-110 ms on it, on the event loop. Four keys sending such
 * a query back to back, each refused only after validation, held /healthz at 5.3 s p99 (issue
 * 33). Every operation of the document counts, named or not (one the client does not pick is
 * still validated). Verdicts are remembered by the document's text, so a refusal sent again is
 * a hash and a lookup; a document that does not parse is left to the server's own answer.
 */
export class DocumentScreen {
  private verdicts = new Map<string, GraphQLError | null>();

  constructor(private readonly schema: GraphQLSchema, private readonly limits: QueryLimits, private readonly maxTokens: number) {}

  refusal(query: unknown): GraphQLError | null {
    if (typeof query !== 'string') return null;
    // A short document is its own key; a long one is remembered by its digest (the memory stays small).
    const key = query.length <= SHORT_DOCUMENT ? query : createHash('sha256').update(query).digest('base64');
    const known = this.verdicts.get(key);
    if (known !== undefined) return known;
    const verdict = this.judge(query);
    if (this.verdicts.size >= MAX_VERDICTS) this.verdicts = new Map();
    this.verdicts.set(key, verdict);
    return verdict;
  }

  private judge(query: string): GraphQLError | null {
    let document;
    try {
      document = parse(query, { maxTokens: this.maxTokens });
    } catch {
      return null;
    }
    for (const definition of document.definitions) {
      if (definition.kind !== Kind.OPERATION_DEFINITION) continue;
      const error = queryLimitError(this.schema, document, definition, this.limits);
      if (error) return error;
    }
    return null;
  }
}
