import {
  GraphQLError, Kind, parse, validate,
  type DocumentNode, type ExecutionArgs, type ExecutionResult, type FormattedExecutionResult, type GraphQLFormattedError, type GraphQLSchema,
  type ValidationRule,
} from 'graphql';
import type { SubscribePayload } from 'graphql-ws';
import type { Logger } from 'pino';
import type { GraphQLContext } from './graphql-context';
import { formatGraphQLError } from './graphql-errors';
import { nulByteInVariables } from './nul-byte-checks';

/**
 * graphql-ws hooks that make an operation over a WebSocket fail as it would over HTTP (Apollo):
 * a syntax error is an `error` message with GRAPHQL_PARSE_FAILED (graphql-ws would close the
 * socket with the parser's message), validation errors carry GRAPHQL_VALIDATION_FAILED or
 * their rule's code, variable errors BAD_USER_INPUT, and every error goes through
 * formatGraphQLError (codes from the error table, no stack traces).
 */
export function websocketOperations(rules: readonly ValidationRule[], maxTokens: number, logger: Logger) {
  /**
   * Documents that parsed and validated, by their text (as Apollo's document store does over
   * HTTP): a client that opens 500 subscriptions of one document has it parsed and validated
   * once, not 500 times (~0.3 ms each, 150 ms of event loop in one burst). Bounded: a flood of
   * distinct documents starts it over.
   */
  let valid = new Map<string, DocumentNode>();
  return {
    /**
     * Parses (stopping at `maxTokens`, as Apollo does over HTTP), validates and checks the
     * variables; errors are returned (sent as an `error` message), not thrown. `caller` is the
     * operation's context.
     */
    prepare(schema: GraphQLSchema, payload: SubscribePayload, caller: GraphQLContext): ExecutionArgs | readonly GraphQLError[] {
      let document = valid.get(payload.query);
      if (!document) {
        try {
          document = parse(payload.query, { maxTokens });
        } catch (error) {
          return [withCode(readingError(error), 'GRAPHQL_PARSE_FAILED')];
        }
        let invalid: readonly GraphQLError[];
        try {
          invalid = validate(schema, document, rules);
        } catch (error) {
          return [withCode(readingError(error), 'GRAPHQL_VALIDATION_FAILED')];
        }
        if (invalid.length > 0) return invalid.map((error) => withCode(error, 'GRAPHQL_VALIDATION_FAILED'));
        if (valid.size >= MAX_VALID_DOCUMENTS) valid = new Map();
        valid.set(payload.query, document);
      }
      const nul = nulByteInVariables(document, payload.operationName, payload.variables);
      if (nul) return [nul];
      return { schema, document, operationName: payload.operationName, variableValues: payload.variables, contextValue: caller };
    },

    formatResult(result: ExecutionResult): FormattedExecutionResult {
      return formatExecutionResult(result, logger);
    },

    formatErrors(errors: readonly GraphQLError[]): GraphQLFormattedError[] {
      return errors.map((error) => formatGraphQLError(error.toJSON(), error, logger));
    },
  };
}

const MAX_VALID_DOCUMENTS = 1_000;

/** An execution result as a WebSocket client gets it: errors formatted as over HTTP (the subscription hub's events too). */
export function formatExecutionResult(result: ExecutionResult, logger: Logger): FormattedExecutionResult {
  if (!result.errors) return result as FormattedExecutionResult;
  return {
    ...result,
    errors: result.errors.map((error) => {
      const coded = isVariableError(error) ? withCode(error, 'BAD_USER_INPUT') : error;
      return formatGraphQLError(coded.toJSON(), coded, logger);
    }),
  };
}

/**
 * What parsing or validating threw. Besides GraphQL's own errors, a document nested thousands
 * of levels deep overflows the stack (a RangeError, which graphql-ws answered by closing the
 * socket with 4500 and the error's message); it is refused like a syntax error, as over HTTP.
 */
function readingError(error: unknown): GraphQLError {
  if (error instanceof GraphQLError) return error;
  if (error instanceof RangeError) return new GraphQLError('the document nests too deeply to be read');
  throw error;
}

/** `error` wrapped as Apollo does (its own code kept as the original's), so both transports format it alike. */
function withCode(error: GraphQLError, code: string): GraphQLError {
  if (error.extensions.code !== undefined) return error;
  return new GraphQLError(error.message, {
    nodes: error.nodes, source: error.source, positions: error.positions, path: error.path, originalError: error, extensions: { code },
  });
}

/** A variable's value refused before execution (graphql-js reports these on the variable's definition). */
function isVariableError(error: GraphQLError): boolean {
  return error.extensions.code === undefined && error.nodes?.length === 1 && error.nodes[0].kind === Kind.VARIABLE_DEFINITION;
}
