import { Column, Entity, PrimaryColumn } from 'typeorm';

/**
 * The one use of an upload link (file-uploads.ts): inserted, keyed by the file id the link
 * names, before a byte is stored. The primary key makes the use one-time even when two PUTs race:
 * exactly one insert succeeds, the other is refused (409) before it reads the body. The claim
 * stays until the link has expired (a used link stays refused while it could still verify);
 * then the sweep deletes it, and removes the object when no file row was ever inserted (a server
 * that died between storing the bytes and inserting the row).
 */
@Entity('file_upload_claims')
export class FileUploadClaim {
  @PrimaryColumn('text', { name: 'file_id' }) fileId: string;
  @Column('text', { name: 'workspace_id' }) workspaceId: string;
  /** Where the bytes go: the managed store (null) or the deployment's bucket, and the key. */
  @Column('integer', { name: 'storage_credential_id', nullable: true }) storageCredentialId: number | null;
  @Column('text', { name: 'object_key' }) objectKey: string;
  /** The link's expiry: until then the claim is what refuses a second use. */
  @Column('timestamptz', { name: 'expires_at' }) expiresAt: Date;
  @Column('timestamptz', { name: 'created_at' }) createdAt: Date;
}
