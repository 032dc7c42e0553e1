import { Column, CreateDateColumn, Entity, PrimaryGeneratedColumn } from 'typeorm';

export type StorageCredentialStatus = 'unverified' | 'verified' | 'failed';

/** What any API may show of a credential: never the secret, and only the last 4 characters of the key id. */
export interface PublicStorageCredential {
  id: number;
  name: string;
  provider: 's3';
  endpoint: string | null;
  region: string;
  bucket: string;
  keyPrefix: string;
  accessKeyId: string;
  status: StorageCredentialStatus;
  statusMessage: string | null;
  verifiedAt: Date | null;
  createdAt: Date;
}

/**
 * A customer's own bucket for outputs (`storage_credential_id` in docs/api-contract.md, an integer). The secret
 * access key is kept AES-256-GCM-sealed (see SecretBox), because the platform signs URLs with
 * it; agents never see it. Only `verified` credentials may receive outputs.
 */
@Entity('storage_credentials')
export class StorageCredential {
  @PrimaryGeneratedColumn('increment') id: number;
  @Column('text', { name: 'workspace_id' }) workspaceId: string;
  @Column('text') name: string;
  @Column('text') provider: 's3';
  /** S3-compatible endpoint URL; null means AWS S3. */
  @Column('text', { nullable: true }) endpoint: string | null;
  @Column('text') region: string;
  @Column('text') bucket: string;
  /** '' or a prefix ending in '/', prepended to every key we write. */
  @Column('text', { name: 'key_prefix' }) keyPrefix: string;
  @Column('text', { name: 'access_key_id' }) accessKeyId: string;
  /** iv (12 bytes) + GCM tag (16) + ciphertext of the secret access key. */
  @Column('bytea', { name: 'secret_ciphertext' }) secretCiphertext: Buffer;
  @Column('text') status: StorageCredentialStatus;
  /** Why the last verification failed, in the store's words. */
  @Column('text', { name: 'status_message', nullable: true }) statusMessage: string | null;
  @Column('timestamptz', { name: 'verified_at', nullable: true }) verifiedAt: Date | null;
  @CreateDateColumn({ name: 'created_at', type: 'timestamptz' }) createdAt: Date;
  @Column('timestamptz', { name: 'deleted_at', nullable: true }) deletedAt: Date | null;

  toPublic(): PublicStorageCredential {
    return {
      id: this.id, name: this.name, provider: this.provider, endpoint: this.endpoint, region: this.region,
      bucket: this.bucket, keyPrefix: this.keyPrefix, accessKeyId: maskAccessKeyId(this.accessKeyId),
      status: this.status, statusMessage: this.statusMessage, verifiedAt: this.verifiedAt, createdAt: this.createdAt,
    };
  }

  /** A credential serialized by accident (a log line, a resolver returning the entity) shows the public view only. */
  toJSON(): PublicStorageCredential {
    return this.toPublic();
  }
}

export function maskAccessKeyId(accessKeyId: string): string {
  return accessKeyId.length > 4 ? `****${accessKeyId.slice(-4)}` : '****';
}
