import type { IncomingMessage } from 'node:http';
import { AppError } from '../../control-plane/api/errors';
import { parseJson } from '../../control-plane/api/inference';
import { OPERATOR, readBody, UNCOUNTED, type BodyMemory } from '../http/read-body';

/** What one GraphQL request may cost before it is refused (gateway config, docs/configuration.md). */
export interface GraphQLLimits {
  /** Largest body (HTTP) or message (WebSocket) of a caller with a key. */
  maxBodyBytes: number;
  /** Largest body without a key, and largest WebSocket message before `connection_init` was accepted: sign-in needs a few hundred bytes. */
  anonymousMaxBodyBytes: number;
  /** Most lexical tokens in a document: graphql-js stops parsing there, before validation. */
  maxTokens: number;
  /** graphql-ws keep-alive ping interval. */
  keepAliveMs: number;
  /** A WebSocket that sends no `connection_init` within this is closed with 4408. */
  connectionInitTimeoutMs: number;
  /** Largest estimated database cost of one operation (query-limits.ts); more is QUERY_TOO_COMPLEX before it runs. */
  maxDatabaseCost: number;
  /** How many of one operation's resolvers may wait on the database at once (database-cost.ts QuerySlots). */
  databaseQueriesPerOperation: number;
}

/**
 * The JSON body of `POST /graphql`, read only after the caller was identified from its
 * Authorization header: without a key (or with one that is no key) only sign-in is served, so
 * at most `anonymousMaxBodyBytes` are read and anything larger is refused unread. Over-deep JSON
 * is refused while scanning, before JSON.parse builds it. A key's body is held in its request's
 * budget (`memory`); the operator's is nobody's.
 */
export async function readGraphQLBody(request: IncomingMessage, hasKey: boolean, limits: GraphQLLimits, memory?: BodyMemory): Promise<unknown> {
  const limit = hasKey ? limits.maxBodyBytes : limits.anonymousMaxBodyBytes;
  let raw: Buffer;
  try {
    raw = await readBody(request, limit, memory ?? (hasKey ? OPERATOR : UNCOUNTED));
  } catch (error) {
    if (hasKey || !(error instanceof AppError) || error.code !== 'body_too_large') throw error;
    throw new AppError('invalid_api_key', `send "Authorization: Bearer <API_KEY>": without a key only sign-in (redeemSignInLink) is served, in at most ${limit} bytes`);
  }
  return raw.length ? parseJson(raw) : {};
}
