import { randomBytes } from 'node:crypto';
import type { DataSource, Repository } from 'typeorm';
import { IsNull } from 'typeorm';
import { AppError } from '../errors/app-error';
import { hostOf, resolvePublicHost, systemResolver, type HostResolver } from '../network/public-host';
import type { ObjectStore } from './object-store';
import { describeS3Error, S3ObjectStore, type S3ObjectStoreOptions } from './s3-object-store';
import { SecretBox } from '../secret-box';
import { validateStorageCredentialInput, type StorageCredentialInput } from './storage-credential-input';
import { StorageCredential } from './storage-credential.entity';

/** Builds the store for a credential; tests inject one, production uses S3ObjectStore. */
export type ObjectStoreFactory = (options: S3ObjectStoreOptions) => ObjectStore;

export interface StorageCredentialServiceOptions {
  /** 32 bytes; seals secret access keys at rest. Losing it makes every stored secret unreadable. */
  encryptionKey: Buffer;
  /** `STORAGE_ALLOW_PRIVATE_ENDPOINTS`: accept endpoints on private, loopback and link-local addresses. @default false */
  allowPrivateEndpoints?: boolean;
  /** How endpoint host names are resolved for that check. @default the system resolver */
  resolve?: HostResolver;
}

/** Key, under the credential's prefix, of the object a verification writes, reads and deletes. */
export const VERIFY_KEY_PREFIX = '.platform-verify/';
const MAX_STATUS_MESSAGE = 1000;
const MAX_SERIAL = 2_147_483_647;

/**
 * Customers' own output buckets. A credential is usable (`storeFor`) only after `verify` has
 * written, read back and deleted a real object with it, so a typo surfaces when the user saves
 * the credential, not as `storage_upload_failed` on their first paid image.
 */
export class StorageCredentialService {
  private readonly credentials: Repository<StorageCredential>;
  private readonly secrets: SecretBox;

  constructor(
    dataSource: DataSource,
    private readonly options: StorageCredentialServiceOptions,
    private readonly createStore: ObjectStoreFactory = (storeOptions) => new S3ObjectStore(storeOptions),
    private readonly now: () => number = Date.now,
  ) {
    this.credentials = dataSource.getRepository(StorageCredential);
    this.secrets = new SecretBox(options.encryptionKey);
  }

  /** Saves a credential as `unverified`; call `verify` before using it. */
  async create(workspaceId: string, input: StorageCredentialInput): Promise<StorageCredential> {
    const valid = validateStorageCredentialInput(input);
    const refused = await this.endpointRefused(valid.endpoint);
    if (refused) throw new AppError('invalid_request', `endpoint must be reachable on a public address: ${refused}`, { param: 'endpoint' });
    return await this.credentials.save(this.credentials.create({
      workspaceId, name: valid.name, provider: valid.provider, endpoint: valid.endpoint, region: valid.region,
      bucket: valid.bucket, keyPrefix: valid.keyPrefix, accessKeyId: valid.accessKeyId,
      secretCiphertext: this.secrets.seal(valid.secretAccessKey, associatedData(workspaceId)),
      status: 'unverified', statusMessage: null, verifiedAt: null, deletedAt: null,
    }));
  }

  /**
   * Writes, reads back and deletes `<prefix>.platform-verify/<random>` with the credential and
   * records the outcome: `verified`, or `failed` with the store's own explanation. Only an
   * unknown id throws; a failing bucket is a result, not an error.
   */
  async verify(workspaceId: string, id: number): Promise<StorageCredential> {
    const credential = await this.owned(workspaceId, id);
    // Checked again: the name may point elsewhere now. Nothing is sent to a refused endpoint.
    const refused = await this.endpointRefused(credential.endpoint);
    if (refused) {
      Object.assign(credential, { status: 'failed', statusMessage: `not contacted: the endpoint must be reachable on a public address: ${refused}`, verifiedAt: null });
      return await this.credentials.save(credential);
    }
    const store = this.createStore(this.storeOptions(credential));
    const key = `${VERIFY_KEY_PREFIX}${randomBytes(12).toString('hex')}`;
    const payload = Buffer.from(`storage credential ${credential.id} verification\n`);
    let written = false;
    try {
      await store.put(key, payload, 'text/plain');
      written = true;
      const read = await store.get(key);
      if (!read) throw new Error(`the test object ${key} was written but could not be read back`);
      if (!read.data.equals(payload)) throw new Error(`the test object ${key} read back differs from what was written`);
      await store.delete(key);
      written = false;
      credential.status = 'verified';
      credential.statusMessage = null;
      credential.verifiedAt = new Date(this.now());
    } catch (error) {
      // The failure is what gets recorded; a leftover test object is removed if possible,
      // and if even that fails the recorded message already says why.
      if (written) await store.delete(key).catch(() => undefined);
      credential.status = 'failed';
      credential.statusMessage = statusMessage(error);
      credential.verifiedAt = null;
    } finally {
      store.close?.();
    }
    return await this.credentials.save(credential);
  }

  /**
   * Why the platform must not connect to a customer's endpoint, or null. The S3 client resolves
   * the name again when it connects, so a name re-pointed in between is not caught here
   * (webhooks pin the address; the AWS SDK gives no such hook).
   */
  private async endpointRefused(endpoint: string | null): Promise<string | null> {
    if (endpoint === null || this.options.allowPrivateEndpoints) return null;
    const host = await resolvePublicHost(hostOf(new URL(endpoint)), this.options.resolve ?? systemResolver);
    return 'refused' in host ? host.refused : null;
  }

  async list(workspaceId: string): Promise<StorageCredential[]> {
    return await this.credentials.find({ where: { workspaceId, deletedAt: IsNull() }, order: { id: 'ASC' } });
  }

  async get(workspaceId: string, id: number): Promise<StorageCredential> {
    return await this.owned(workspaceId, id);
  }

  /** Soft delete: requests that recorded the id keep a readable history; the id never works again. */
  async delete(workspaceId: string, id: number): Promise<StorageCredential> {
    const credential = await this.owned(workspaceId, id);
    credential.deletedAt = new Date(this.now());
    return await this.credentials.save(credential);
  }

  /** The store for a request's `storage_credential_id`: 422 unless it names a verified credential of this workspace. */
  async storeFor(workspaceId: string, id: number): Promise<ObjectStore> {
    const credential = await this.find(workspaceId, id);
    if (!credential) {
      throw new AppError('storage_credential_not_found', `storage_credential_id ${id} is not a storage credential of this workspace`, { param: 'storage_credential_id' });
    }
    if (credential.status !== 'verified') {
      const reason = credential.status === 'failed' ? `its last verification failed (${credential.statusMessage})` : 'it has not been verified yet';
      throw new AppError('storage_credential_not_verified', `storage credential ${id} ('${credential.name}') cannot receive outputs: ${reason}; verify it first`, { param: 'storage_credential_id' });
    }
    return this.createStore(this.storeOptions(credential));
  }

  private storeOptions(credential: StorageCredential): S3ObjectStoreOptions {
    return {
      endpoint: credential.endpoint ?? undefined,
      region: credential.region,
      bucket: credential.bucket,
      accessKeyId: credential.accessKeyId,
      secretAccessKey: this.secrets.open(credential.secretCiphertext, associatedData(credential.workspaceId)),
      // Custom endpoints (MinIO, R2, s3rver) take path-style requests; AWS prefers virtual hosts.
      forcePathStyle: credential.endpoint !== null,
      keyPrefix: credential.keyPrefix,
    };
  }

  /** Another workspace's id is indistinguishable from an unknown one. */
  private async find(workspaceId: string, id: number): Promise<StorageCredential | null> {
    if (!Number.isSafeInteger(id) || id < 1 || id > MAX_SERIAL) return null;
    return await this.credentials.findOne({ where: { id, workspaceId, deletedAt: IsNull() } });
  }

  private async owned(workspaceId: string, id: number): Promise<StorageCredential> {
    const credential = await this.find(workspaceId, id);
    if (!credential) throw new AppError('not_found', `no storage credential ${id} in this workspace`, { param: 'id' });
    return credential;
  }
}

function associatedData(workspaceId: string): string {
  return `storage_credentials.secret:${workspaceId}`;
}

function statusMessage(error: unknown): string {
  const message = error instanceof AppError ? error.message : describeS3Error(error);
  return message.length > MAX_STATUS_MESSAGE ? `${message.slice(0, MAX_STATUS_MESSAGE - 1)}…` : message;
}
