import { Column, CreateDateColumn, Entity, Index, PrimaryColumn, PrimaryGeneratedColumn, UpdateDateColumn } from 'typeorm';
import { nullableNumeric } from '../database/numeric-column';

/** How the weights are packed (docs/adapters.md); `AdapterRef.format` is `ADAPTER_FORMAT_<this>`. */
export const ADAPTER_FORMATS = ['GGUF', 'PEFT_TAR', 'SAFETENSORS', 'HUGGING_FACE'] as const;
export type AdapterFormat = (typeof ADAPTER_FORMATS)[number];

/** Where an adapter's weights came from (docs/adapters.md). */
export const ADAPTER_SOURCE_KINDS = ['FILE', 'BUCKET', 'HUGGING_FACE'] as const;
export type AdapterSourceKind = (typeof ADAPTER_SOURCE_KINDS)[number];

/**
 * A LoRA adapter of a workspace (`ad_…`), one row with its current revision. The weights of
 * every revision (this one included) are in `adapter_revisions`, so a request that got revision
 * 3 keeps a source to fetch after revision 4 replaced it.
 */
@Entity('adapters')
@Index(['workspaceId', 'name'], { unique: true })
export class Adapter {
  @PrimaryColumn('text') id: string;
  @Column('text', { name: 'workspace_id' }) workspaceId: string;
  /** What clients put in `model` (ADAPTER_NAME in adapter-rules.ts). */
  @Column('text') name: string;
  @Column('text', { name: 'base_model' }) baseModel: string;
  @Column('integer') rank: number;
  @Column('text') format: AdapterFormat;
  @Column('text', { name: 'source_kind' }) sourceKind: AdapterSourceKind;
  /** The file id, the bucket key, or `org/name[@revision]`: as the owner gave it. */
  @Column('text', { name: 'source_ref' }) sourceRef: string;
  @Column('text', { nullable: true }) sha256: string | null;
  @Column('bigint', { name: 'size_bytes', nullable: true, transformer: nullableNumeric }) sizeBytes: number | null;
  @Column('integer') revision: number;
  /** Offered to guests of shared serving at the owner's per-token price of the base model. */
  @Column('boolean', { name: 'shared_with_guests', default: false }) sharedWithGuests: boolean;
  @CreateDateColumn({ name: 'created_at', type: 'timestamptz' }) createdAt: Date;
  @UpdateDateColumn({ name: 'updated_at', type: 'timestamptz' }) updatedAt: Date;
}

/** The weights of one revision of an adapter: where the platform keeps them (or the HF repo id). */
@Entity('adapter_revisions')
export class AdapterRevision {
  @PrimaryColumn('text', { name: 'adapter_id' }) adapterId: string;
  @PrimaryColumn('integer') revision: number;
  @Column('text') format: AdapterFormat;
  @Column('integer') rank: number;
  @Column('text', { name: 'source_kind' }) sourceKind: AdapterSourceKind;
  @Column('text', { name: 'source_ref' }) sourceRef: string;
  /** The managed store's key of the weights (copied there at registration); null for HUGGING_FACE. */
  @Column('text', { name: 'object_key', nullable: true }) objectKey: string | null;
  @Column('text', { nullable: true }) sha256: string | null;
  @Column('bigint', { name: 'size_bytes', nullable: true, transformer: nullableNumeric }) sizeBytes: number | null;
  @CreateDateColumn({ name: 'created_at', type: 'timestamptz' }) createdAt: Date;
}

/** An adapter attached to a deployment of its base model. */
@Entity('adapter_attachments')
@Index(['adapterId', 'deploymentId'], { unique: true })
export class AdapterAttachment {
  @PrimaryGeneratedColumn('identity', { type: 'bigint' }) id: string;
  @Column('text', { name: 'adapter_id' }) adapterId: string;
  @Index() @Column('text', { name: 'deployment_id' }) deploymentId: string;
  @CreateDateColumn({ name: 'created_at', type: 'timestamptz' }) createdAt: Date;
}
