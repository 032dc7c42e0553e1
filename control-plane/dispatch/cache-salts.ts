import { createHmac, randomBytes } from 'node:crypto';
import type { DataSource } from 'typeorm';
import { clusterSetting } from '../database/cluster-settings';
import { parseKey } from '../server-keys';

/** The `cluster_settings` row holding the key every workspace's salt is derived from. */
export const CACHE_SALT_KEY_SETTING = 'prefix_cache_salt_key';

/** Workspaces whose salt is remembered (a hit: 41–96 ns); past it the memo starts over (deriving one again: an HMAC, 4.7–8.2 µs). */
const MEMO_LIMIT = 100_000;

/**
 * Each tenant's prefix-cache salt (`Assign.cache_salt`): two jobs may reuse each other's cached
 * prompt prefix only when their salts are equal, so a guest of shared serving cannot read an
 * owner's prompt through `cached_tokens` or time to first token (a guest once read a 4-digit
 * secret from an owner's system prompt in 40 requests, one digit at a time).
 *
 * The salt is HMAC-SHA256(cluster key, workspace id), 43 base64url characters: what vLLM asks
 * of a `cache_salt` (random, 256 bits, kept from third parties) and a safe alphabet for the
 * stores that key by it (LMCache refuses other characters). The key is made once per cluster by
 * the first server to start and read by the others from `cluster_settings` (servers share only
 * the database), so a workspace's salt is the same on every server, survives restarts, and is
 * derivable from nothing a tenant sees: never from its id, key or name alone.
 */
export class CacheSalts {
  private readonly memo = new Map<string, string>();

  constructor(private readonly key: Buffer) {}

  /** The cluster's salts: its key from the database, written first by whichever server starts first. */
  static async load(dataSource: Pick<DataSource, 'query'>): Promise<CacheSalts> {
    const stored = await clusterSetting(dataSource, CACHE_SALT_KEY_SETTING, randomBytes(32).toString('hex'));
    return new CacheSalts(parseKey(stored, `cluster_settings.${CACHE_SALT_KEY_SETTING}`));
  }

  /** The salt of `workspaceId`'s jobs; memoized (it is on every text request's path). */
  of(workspaceId: string): string {
    let salt = this.memo.get(workspaceId);
    if (salt === undefined) {
      if (this.memo.size >= MEMO_LIMIT) this.memo.clear();
      salt = createHmac('sha256', this.key).update(workspaceId).digest('base64url');
      this.memo.set(workspaceId, salt);
    }
    return salt;
  }
}
