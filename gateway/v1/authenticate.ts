import { AppError } from '../../control-plane/api/errors';
import type { AuthenticatedKey, InferencePort } from '../../control-plane/api/inference';
import { bearerToken } from '../http/bearer-token';

/** `Authorization: Bearer mk-…` to its key; 401 for a missing, malformed, unknown or revoked key. */
export async function authenticate(apiKeys: InferencePort['apiKeys'], header: string | undefined): Promise<AuthenticatedKey> {
  return known(await apiKeys.authenticate(tokenOf(header)));
}

/** `authenticate` when its answer is known without waiting (the key is cached), else undefined; the same 401s. */
export function authenticateNow(apiKeys: InferencePort['apiKeys'], header: string | undefined): AuthenticatedKey | undefined {
  const key = apiKeys.authenticateNow(tokenOf(header));
  return key === undefined ? undefined : known(key);
}

function tokenOf(header: string | undefined): string {
  if (!header) throw new AppError('invalid_api_key', 'missing Authorization header; send "Authorization: Bearer <API_KEY>"');
  const token = bearerToken(header);
  if (!token) throw new AppError('invalid_api_key', 'the Authorization header must be "Bearer <API_KEY>"');
  return token;
}

function known(key: AuthenticatedKey | null): AuthenticatedKey {
  if (!key) throw new AppError('invalid_api_key', 'incorrect API key provided');
  return key;
}
