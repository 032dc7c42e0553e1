import { Column, Entity, PrimaryColumn } from 'typeorm';
import { numeric } from '../database/numeric-column';

export const REQUEST_STATUSES = ['queued', 'running', 'succeeded', 'failed', 'canceled'] as const;
export type RequestStatus = (typeof REQUEST_STATUSES)[number];

export type RequestModality = 'image' | 'video';
export type RequestKind = 'image-generation' | 'image-edit' | 'video-generation';

/** An input file of the job, kept in managed storage until the record is terminal. */
export interface RequestInput {
  name: 'image' | 'mask' | 'input_reference';
  objectKey: string;
  contentType: string;
}


/**
 * One image or video job (`req_<hex>`): the async request record of docs/api-contract.md#request-records, also behind sync
 * image calls and the Video object. queued → running → succeeded | failed; queued → canceled.
 */
@Entity('request_records')
export class RequestRecord {
  @PrimaryColumn('text') id: string;
  @Column('text', { name: 'workspace_id' }) workspaceId: string;
  @Column('text', { name: 'deployment_id' }) deploymentId: string;
  @Column('text', { name: 'api_key_id' }) apiKeyId: string;
  @Column('text') modality: RequestModality;
  @Column('text') kind: RequestKind;
  @Column('text', { name: 'model_id' }) modelId: string;
  @Column('text') status: RequestStatus;
  /** A sync image call: the HTTP request waits for it (and its timeout cancels it). */
  @Column('boolean') sync: boolean;
  /** The normalised job parameters, exactly what the agent receives as the job body. */
  @Column('jsonb') params: Record<string, unknown>;
  @Column('jsonb') inputs: RequestInput[];
  @Column('text', { name: 'response_format' }) responseFormat: 'url' | 'b64_json';
  @Column('integer', { name: 'output_count' }) outputCount: number;
  @Column('integer', { name: 'storage_credential_id', nullable: true }) storageCredentialId: number | null;
  @Column('text', { name: 'storage_provider', nullable: true }) storageProvider: string | null;
  @Column('text', { name: 'output_bucket', nullable: true }) outputBucket: string | null;
  @Column('text', { name: 'output_object_key', nullable: true }) outputObjectKey: string | null;
  @Column('text', { name: 'output_keys', array: true }) outputKeys: string[];
  @Column('text', { name: 'webhook_url', nullable: true }) webhookUrl: string | null;
  @Column('text', { name: 'idempotency_key', nullable: true }) idempotencyKey: string | null;
  /** SHA-256 of the submission, to tell a retry from a different request under the same key. */
  @Column('text', { name: 'request_hash', nullable: true }) requestHash: string | null;
  @Column('text', { name: 'error_code', nullable: true }) errorCode: string | null;
  @Column('text', { name: 'error_message', nullable: true }) errorMessage: string | null;
  @Column('integer') progress: number;
  @Column('integer', { name: 'estimated_seconds' }) estimatedSeconds: number;
  @Column('text', { name: 'replica_id', nullable: true }) replicaId: string | null;
  /** The server running the job; it renews the lease while the job is alive. */
  @Column('text', { name: 'lease_owner', nullable: true }) leaseOwner: string | null;
  @Column('timestamptz', { name: 'lease_expires_at', nullable: true }) leaseExpiresAt: Date | null;
  @Column('timestamptz', { name: 'deadline_at', nullable: true }) deadlineAt: Date | null;
  /** What billing may attribute to the job: its GPU time when it succeeded, 0 when it failed or was canceled. */
  @Column('numeric', { name: 'billed_gpu_seconds', precision: 12, scale: 3, transformer: numeric }) billedGpuSeconds: number;
  @Column('timestamptz', { name: 'queued_at' }) queuedAt: Date;
  @Column('timestamptz', { name: 'started_at', nullable: true }) startedAt: Date | null;
  @Column('timestamptz', { name: 'completed_at', nullable: true }) completedAt: Date | null;
  @Column('timestamptz', { name: 'outputs_expire_at', nullable: true }) outputsExpireAt: Date | null;
  @Column('timestamptz', { name: 'outputs_deleted_at', nullable: true }) outputsDeletedAt: Date | null;
  /** The submission's W3C trace context, when it was traced: the job's run and its webhook continue that trace (docs/tracing.md). */
  @Column('text', { nullable: true }) traceparent: string | null;
}
