import type { DataSource, EntityManager, Repository } from 'typeorm';
import { IsNull } from 'typeorm';
import { isPositive } from '../billing/money';
import { AppError } from '../errors/app-error';
import type { ClusterNotifier } from '../events/cluster-notifier';
import { newId } from '../ids';
import { hashSecret, newSecret, sameHash } from '../secrets';
import { Workspace } from '../workspaces/workspace.entity';
import { ApiKey } from './api-key.entity';
import { RefreshingCache } from '../cache/refreshing-cache';

export const API_KEY_PREFIX = 'mk-';

/** What the request path needs to know about a caller: small, immutable, cacheable. */
export interface AuthenticatedKey {
  readonly id: string;
  readonly workspaceId: string;
  readonly rpmLimit: number;
  readonly tpdLimit: number;
  /** The workspace has a credit balance and it is used up (402 `insufficient_quota`). */
  readonly creditExhausted: boolean;
  /** The workspace stores request and answer bodies in its request log (off by default; changing it clears every server's cache). */
  readonly storesBodies: boolean;
}

export interface ApiKeyServiceOptions {
  cacheTtlMs: number;
  defaultRpmLimit: number;
  defaultTpdLimit: number;
}

export interface KeyLimits {
  rpmLimit?: number | null;
  tpdLimit?: number | null;
}

/**
 * Workspace API keys. Plaintext (`mk-` + 32 random bytes) is returned once and never stored;
 * lookups go by SHA-256, so timing reveals nothing about a stored key, and successful or failed
 * lookups are cached (a RefreshingCache: refreshed in the background after `cacheTtlMs`) so the
 * hot path does not wait for PostgreSQL.
 */
export class ApiKeyService {
  private readonly keys: Repository<ApiKey>;
  private readonly workspaces: Repository<Workspace>;
  private readonly cache: RefreshingCache<string, AuthenticatedKey | null>;
  private readonly invalidationListeners = new Set<(hash: string) => void>();

  constructor(
    dataSource: DataSource,
    private readonly options: ApiKeyServiceOptions,
    private readonly notifier: Pick<ClusterNotifier, 'publish' | 'on' | 'onReset'>,
    private readonly now: () => number = Date.now,
  ) {
    this.keys = dataSource.getRepository(ApiKey);
    this.workspaces = dataSource.getRepository(Workspace);
    this.cache = new RefreshingCache((hash) => this.lookup(hash), { ttlMs: options.cacheTtlMs, maxEntries: 100_000, now });
    notifier.on('api-key', (hash) => this.invalidated(hash));
    notifier.onReset(() => this.invalidated('*'));
  }

  /**
   * `listener` hears of every key whose cached state was dropped on this server (its hash, or
   * `*` for all of them), whichever server changed it: holders of long-lived connections
   * authenticated with a key re-check it then (a revoked key's open WebSockets are closed).
   */
  onInvalidated(listener: (hash: string) => void): () => void {
    this.invalidationListeners.add(listener);
    return () => this.invalidationListeners.delete(listener);
  }

  /** Forgets cached lookups on every server (after a workspace's credit changes, for instance). */
  clearCache(): void {
    this.invalidated('*');
    this.notifier.publish('api-key', '*');
  }

  /** `manager`: write the key in the caller's transaction (a workspace and its first key together). */
  async create(workspaceId: string, name: string, limits: KeyLimits = {}, manager?: EntityManager): Promise<{ apiKey: ApiKey; plaintext: string }> {
    const plaintext = newSecret(API_KEY_PREFIX);
    const apiKey = this.keys.create({
      id: newId('key'),
      workspaceId,
      name: name.trim() || 'default',
      displayPrefix: plaintext.slice(0, 7),
      keyHash: hashSecret(plaintext),
      rpmLimit: validLimit(limits.rpmLimit, 'rpmLimit') ?? this.options.defaultRpmLimit,
      tpdLimit: validLimit(limits.tpdLimit, 'tpdLimit') ?? this.options.defaultTpdLimit,
      regeneratedAt: null,
      revokedAt: null,
    });
    return { apiKey: await (manager?.getRepository(ApiKey) ?? this.keys).save(apiKey), plaintext };
  }

  async list(workspaceId: string): Promise<ApiKey[]> {
    return await this.keys.find({ where: { workspaceId, revokedAt: IsNull() }, order: { createdAt: 'ASC' } });
  }

  /** Issues a new plaintext for the key; the old one stops working at once. */
  async regenerate(workspaceId: string, id: string): Promise<{ apiKey: ApiKey; plaintext: string }> {
    const apiKey = await this.owned(workspaceId, id);
    const oldHash = apiKey.keyHash;
    const plaintext = newSecret(API_KEY_PREFIX);
    apiKey.keyHash = hashSecret(plaintext);
    apiKey.displayPrefix = plaintext.slice(0, 7);
    apiKey.regeneratedAt = new Date(this.now());
    await this.keys.save(apiKey);
    this.forget(oldHash);
    return { apiKey, plaintext };
  }

  async revoke(workspaceId: string, id: string): Promise<ApiKey> {
    const apiKey = await this.owned(workspaceId, id);
    apiKey.revokedAt = new Date(this.now());
    await this.keys.save(apiKey);
    this.forget(apiKey.keyHash);
    return apiKey;
  }

  /** Revokes every key of a workspace (it is being deleted); each stops working at once on every server. */
  async revokeAll(workspaceId: string): Promise<number> {
    const [rows]: [Array<{ key_hash: string }>, number] = await this.keys.manager.query(
      'UPDATE api_keys SET revoked_at = $2 WHERE workspace_id = $1 AND revoked_at IS NULL RETURNING key_hash', [workspaceId, new Date(this.now())]);
    for (const row of rows) this.forget(row.key_hash);
    return rows.length;
  }

  async setLimits(workspaceId: string, id: string, limits: KeyLimits): Promise<ApiKey> {
    const apiKey = await this.owned(workspaceId, id);
    apiKey.rpmLimit = validLimit(limits.rpmLimit, 'rpmLimit') ?? apiKey.rpmLimit;
    apiKey.tpdLimit = validLimit(limits.tpdLimit, 'tpdLimit') ?? apiKey.tpdLimit;
    await this.keys.save(apiKey);
    this.forget(apiKey.keyHash);
    return apiKey;
  }

  /** Resolves a bearer token to its key, or null. Never throws for a malformed token. */
  async authenticate(plaintext: string): Promise<AuthenticatedKey | null> {
    if (!wellFormed(plaintext)) return null;
    return await this.cache.get(hashSecret(plaintext));
  }

  /** `authenticate` when its answer is known without waiting (cached), else undefined. */
  authenticateNow(plaintext: string): AuthenticatedKey | null | undefined {
    if (!wellFormed(plaintext)) return null;
    return this.cache.peek(hashSecret(plaintext))?.value;
  }

  /**
   * The key by id, as `authenticate` would answer it (null once revoked, or its workspace is
   * gone), uncached: work started earlier under the key and run later (a background response
   * resumed by another server) is admitted with its limits and credit as they are now.
   */
  async byId(id: string): Promise<AuthenticatedKey | null> {
    const row = await this.keys.findOne({ where: { id, revokedAt: IsNull() } });
    return row ? await this.lookup(row.keyHash) : null;
  }

  private async lookup(hash: string): Promise<AuthenticatedKey | null> {
    const row = await this.keys.findOne({ where: { keyHash: hash, revokedAt: IsNull() } });
    const workspace = row ? await this.workspaces.findOne({ where: { id: row.workspaceId } }) : null;
    if (!row || !workspace || workspace.deletedAt !== null || !sameHash(row.keyHash, hash)) return null;
    return Object.freeze({
      id: row.id, workspaceId: row.workspaceId, rpmLimit: row.rpmLimit, tpdLimit: row.tpdLimit,
      creditExhausted: workspace.creditBalance !== null && !isPositive(workspace.creditBalance),
      storesBodies: workspace.storeRequestBodies,
    });
  }

  /** Drops a key from this server's cache at once and from every other server's. */
  private forget(hash: string): void {
    this.invalidated(hash);
    this.notifier.publish('api-key', hash);
  }

  private invalidated(hash: string): void {
    if (hash === '*') this.cache.clear();
    else this.cache.delete(hash);
    for (const listener of this.invalidationListeners) listener(hash);
  }

  private async owned(workspaceId: string, id: string): Promise<ApiKey> {
    const apiKey = await this.keys.findOne({ where: { id, revokedAt: IsNull() } });
    if (!apiKey || apiKey.workspaceId !== workspaceId) {
      throw new AppError('not_found', `no API key '${id}' in this workspace`, { param: 'id' });
    }
    return apiKey;
  }
}

function validLimit(value: number | null | undefined, field: string): number | undefined {
  if (value === undefined || value === null) return undefined;
  if (!Number.isSafeInteger(value) || value < 1) {
    throw new AppError('invalid_request', `${field} must be a positive integer, got ${value}`, { param: field });
  }
  return value;
}

/** A token that could be one of our keys (anything else is refused without a lookup). */
function wellFormed(plaintext: string): boolean {
  return plaintext.startsWith(API_KEY_PREFIX) && plaintext.length <= 128;
}
