import { AppError } from '../../control-plane/api/errors';
import type { AuthenticatedKey } from '../../control-plane/api/inference';
import type { QuerySlots } from './database-cost';

export interface GraphQLContext {
  key: AuthenticatedKey | null;
  /** The caller presented the operator token (provider, catalog and credit administration). */
  operator: boolean;
  /** A bearer token was sent but is no key (revoked, regenerated, mistyped): said so, as /v1 does. */
  unknownToken?: boolean;
  /** The socket's peer address (HTTP or WebSocket): who an anonymous sign-in attempt is counted against. */
  clientAddress?: string;
  /**
   * The operation's turns at the database (database-cost.ts): resolvers with a database weight
   * wait for one. Each operation, and each rendering of a subscription event, has its own.
   */
  database?: QuerySlots;
}

/** The caller's workspace; every resolver scopes its records by it. */
export function workspaceOf(context: GraphQLContext): string {
  if (!context.key && context.unknownToken) throw new AppError('invalid_api_key', 'incorrect API key provided');
  if (!context.key) throw new AppError('invalid_api_key', 'send "Authorization: Bearer <API_KEY>" (or connectionParams.authorization for subscriptions)');
  return context.key.workspaceId;
}

/** Operator-only operations: the operator token, never a workspace key. */
export function requireOperator(context: GraphQLContext): void {
  if (!context.operator) {
    throw new AppError(context.key ? 'permission_denied' : 'invalid_api_key', 'this operation needs the operator token (OPERATOR_TOKEN) as the bearer token');
  }
}
