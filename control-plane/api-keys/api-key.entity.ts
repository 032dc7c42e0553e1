import { Column, CreateDateColumn, Entity, Index, PrimaryColumn } from 'typeorm';
import { numeric } from '../database/numeric-column';

/** A workspace API key. Only the SHA-256 of the plaintext is stored; the plaintext is shown once. */
@Entity('api_keys')
export class ApiKey {
  @PrimaryColumn('text') id: string;
  @Index() @Column('text', { name: 'workspace_id' }) workspaceId: string;
  @Column('text') name: string;
  /** First characters of the plaintext (`mk-AbCd…`), so people can tell keys apart. */
  @Column('text', { name: 'display_prefix' }) displayPrefix: string;
  @Index({ unique: true }) @Column('text', { name: 'key_hash' }) keyHash: string;
  @Column('integer', { name: 'rpm_limit' }) rpmLimit: number;
  @Column('bigint', { name: 'tpd_limit', transformer: numeric }) tpdLimit: number;
  @CreateDateColumn({ name: 'created_at', type: 'timestamptz' }) createdAt: Date;
  @Column('timestamptz', { name: 'regenerated_at', nullable: true }) regeneratedAt: Date | null;
  @Column('timestamptz', { name: 'revoked_at', nullable: true }) revokedAt: Date | null;
}
