import type { AuthenticatedKey } from '../../control-plane/api-keys/api-key.service';
import { AppError } from '../../control-plane/errors/app-error';

export interface GraphQLContext {
  key: AuthenticatedKey | null;
}

/** The caller's workspace; every resolver scopes its records by it. */
export function workspaceOf(context: GraphQLContext): string {
  if (!context.key) throw new AppError('invalid_api_key', 'send "Authorization: Bearer <API_KEY>" (or connectionParams.authorization for subscriptions)');
  return context.key.workspaceId;
}
