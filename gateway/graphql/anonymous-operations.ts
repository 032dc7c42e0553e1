import type { ApolloServerPlugin } from '@apollo/server';
import { Kind, type OperationDefinitionNode } from 'graphql';
import { AppError } from '../../control-plane/api/errors';
import type { GraphQLContext } from './graphql-context';

/** The only root fields a caller without a key may ask for: spending a console sign-in link. */
const ANONYMOUS_FIELDS = new Set(['redeemSignInLink', '__typename']);

/**
 * Without a key or the operator token only sign-in runs: anything else (introspection
 * included) is refused after parsing a document of at most a few KB, before any resolver or
 * introspection walk runs, so an anonymous client cannot make the server do work. The schema is
 * no secret (schema.graphql is in the repository); tools introspect with a key.
 * `refuse` maps the AppError to the GraphQL error Apollo sends (its HTTP status included).
 */
export function anonymousOperationsPlugin(refuse: (error: AppError) => never): ApolloServerPlugin<GraphQLContext> {
  return {
    async requestDidStart() {
      return {
        async didResolveOperation({ contextValue, operation }) {
          if (contextValue.key || contextValue.operator || onlyAnonymousFields(operation)) return;
          refuse(new AppError('invalid_api_key', contextValue.unknownToken
            ? 'incorrect API key provided'
            : 'send "Authorization: Bearer <API_KEY>": without a key only sign-in (redeemSignInLink) is served'));
        },
      };
    },
  };
}

function onlyAnonymousFields(operation: OperationDefinitionNode | null | undefined): boolean {
  if (!operation) return false;
  return operation.selectionSet.selections.every((selection) => selection.kind === Kind.FIELD && ANONYMOUS_FIELDS.has(selection.name.value));
}
