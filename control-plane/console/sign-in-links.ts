import type { DataSource } from 'typeorm';
import type { ApiKeyService } from '../api-keys/api-key.service';
import { AppError } from '../errors/app-error';
import { newId } from '../ids';
import { hashSecret, newSecret } from '../secrets';

export const SIGN_IN_TOKEN_PREFIX = 'csl-';

/** Counts a sign-in attempt of a client, or throws 429 `rate_limit_error` (rate-limits/sign-in-throttle.ts). */
export interface SignInAttempts {
  take(clientAddress: string | undefined): void;
}

/**
 * One-time console sign-in links. `npm start` on the embedded defaults prints one for the dev
 * workspace, whose API key was shown only on the first start. The token is random (256 bits),
 * stored as a SHA-256 hash, expires after `ttlMs` and is spent by the first redemption: one
 * UPDATE that checks and marks it, so two tabs racing on the same link cannot both sign in.
 *
 * Redeeming creates an API key of the workspace named "console sign-in" (listed, limited and
 * revocable like any other): the console's session is always a workspace key kept in the tab's
 * session storage, whichever way the person signed in.
 */
export class SignInLinks {
  constructor(
    private readonly dataSource: DataSource,
    private readonly apiKeys: ApiKeyService,
    private readonly ttlMs: number,
    private readonly attempts: SignInAttempts,
  ) {}

  /**
   * A new link's token for `workspaceId`. Its expiry is set on the database's clock, which
   * redeem() checks it against: one clock decides a link's life, whichever server issued it.
   */
  async issue(workspaceId: string): Promise<{ token: string; expiresAt: Date }> {
    const token = newSecret(SIGN_IN_TOKEN_PREFIX);
    const rows: Array<{ expires_at: Date }> = await this.dataSource.query(
      `INSERT INTO console_sign_in_links (id, workspace_id, token_hash, expires_at)
       VALUES ($1, $2, $3, now() + $4::float8 * interval '1 millisecond') RETURNING expires_at`,
      [newId('csl'), workspaceId, hashSecret(token), this.ttlMs],
    );
    return { token, expiresAt: rows[0].expires_at };
  }

  /**
   * Spends the token: a new API key for its workspace, or 401 when it is unknown, used or expired
   * (not saying which). Anyone may call this without a key, so the attempt of `clientAddress`
   * (the socket's peer) is counted first: over the allowance it is 429 and touches no database.
   */
  async redeem(token: string, clientAddress: string | undefined): Promise<{ workspaceId: string; apiKey: string }> {
    this.attempts.take(clientAddress);
    const rows: Array<{ workspace_id: string }> = typeof token === 'string' && token.startsWith(SIGN_IN_TOKEN_PREFIX)
      ? (await this.dataSource.query(
        `UPDATE console_sign_in_links SET used_at = now()
         WHERE token_hash = $1 AND used_at IS NULL AND expires_at > now()
         RETURNING workspace_id`,
        [hashSecret(token)],
      ))[0]
      : [];
    if (rows.length === 0) {
      throw new AppError('invalid_api_key', 'this sign-in link is not valid: it was used already, has expired, or was mistyped; sign in with a workspace API key', { param: 'token' });
    }
    const workspaceId = rows[0].workspace_id;
    const { plaintext } = await this.apiKeys.create(workspaceId, 'console sign-in');
    return { workspaceId, apiKey: plaintext };
  }
}
