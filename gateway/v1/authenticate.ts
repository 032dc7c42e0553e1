import type { ApiKeyService, AuthenticatedKey } from '../../control-plane/api-keys/api-key.service';
import { AppError } from '../../control-plane/errors/app-error';
import { bearerToken } from '../http/bearer-token';

/** `Authorization: Bearer mk-…` to its key; 401 for a missing, malformed, unknown or revoked key. */
export async function authenticate(apiKeys: ApiKeyService, header: string | undefined): Promise<AuthenticatedKey> {
  if (!header) throw new AppError('invalid_api_key', 'missing Authorization header; send "Authorization: Bearer <API_KEY>"');
  const token = bearerToken(header);
  if (!token) throw new AppError('invalid_api_key', 'the Authorization header must be "Bearer <API_KEY>"');
  const key = await apiKeys.authenticate(token);
  if (!key) throw new AppError('invalid_api_key', 'incorrect API key provided');
  return key;
}
