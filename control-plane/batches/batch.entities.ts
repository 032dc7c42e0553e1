import { Column, Entity, PrimaryColumn } from 'typeorm';
import { nullableNumeric, numeric } from '../database/numeric-column';
import { parseJsonText } from '../../common/json-nesting';

/** The endpoints a batch may name, as OpenAI spells them (`url` of every line, `endpoint` of the batch). */
export const BATCH_ENDPOINTS = ['/v1/chat/completions', '/v1/completions', '/v1/embeddings', '/v1/responses'] as const;
export type BatchEndpoint = (typeof BATCH_ENDPOINTS)[number];

export const BATCH_STATUSES = ['validating', 'failed', 'in_progress', 'finalizing', 'completed', 'expired', 'cancelling', 'cancelled'] as const;
export type BatchStatus = (typeof BATCH_STATUSES)[number];
/** Where a batch ends once it stops taking lines: a batch past its window `expired`, a canceled one `cancelled`. */
export type BatchEnd = 'completed' | 'expired' | 'cancelled';
export const TERMINAL_BATCH_STATUSES: readonly BatchStatus[] = ['failed', 'completed', 'expired', 'cancelled'];

/**
 * `batch` files are uploaded by clients; `batch_output` files are a batch's output and error files;
 * `user_data` files are uploads for other uses (OpenAI's name): a LoRA adapter's weights (docs/adapters.md).
 */
export type BatchFilePurpose = 'batch' | 'batch_output' | 'user_data';

/** One entry of a batch's `errors` (why validation failed): OpenAI's BatchError, `line` counted from 1. */
export interface BatchError {
  code: string;
  message: string;
  param: string | null;
  line: number | null;
}

/** JSON kept in a text column: jsonb would refuse the `\u0000` escapes a client's strings may hold. */
const jsonText = {
  to: (value: unknown) => (value === null || value === undefined ? null : JSON.stringify(value)),
  from: (value: string | null) => (value === null ? null : parseJsonText(value)),
};

/** A JSONL file of a deployment endpoint (`file-<hex>`): a batch's input, output or error file. */
@Entity('batch_files')
export class BatchFile {
  @PrimaryColumn('text') id: string;
  @Column('text', { name: 'workspace_id' }) workspaceId: string;
  @Column('text', { name: 'deployment_id' }) deploymentId: string;
  @Column('text') purpose: BatchFilePurpose;
  @Column('text') filename: string;
  @Column('bigint', { transformer: numeric }) bytes: number;
  /** The customer bucket it lives in (the deployment's default storage credential), or null: the managed store. */
  @Column('integer', { name: 'storage_credential_id', nullable: true }) storageCredentialId: number | null;
  @Column('text', { name: 'object_key' }) objectKey: string;
  /** The batch whose output or error file this is; null for uploads. */
  @Column('text', { name: 'batch_id', nullable: true }) batchId: string | null;
  @Column('timestamptz', { name: 'created_at' }) createdAt: Date;
  /**
   * Set by `DELETE /files/{id}`: the file is gone for its owner at once; its bytes stay until
   * no unfinished batch reads them, then the row and the object go (batch-file-purge.ts).
   */
  @Column('timestamptz', { name: 'deleted_at', nullable: true }) deletedAt: Date | null;
}

/**
 * One batch (`batch_<hex>`): validating → in_progress → finalizing → completed, or failed (an
 * invalid input file), or, once it stops taking lines, finalizing → expired (its window
 * passed) or cancelling → cancelled. Counts and token totals move with each line, in the
 * line's own transaction.
 */
@Entity('batches')
export class Batch {
  @PrimaryColumn('text') id: string;
  @Column('text', { name: 'workspace_id' }) workspaceId: string;
  @Column('text', { name: 'deployment_id' }) deploymentId: string;
  /** The key that created it: its tokens count toward this key's tokens per day. */
  @Column('text', { name: 'api_key_id' }) apiKeyId: string;
  @Column('text') endpoint: BatchEndpoint;
  /** The deployment's model when the batch was created. */
  @Column('text') model: string;
  @Column('text', { name: 'input_file_id' }) inputFileId: string;
  @Column('text', { name: 'completion_window' }) completionWindow: string;
  @Column('text') status: BatchStatus;
  /** Set when the batch stops taking lines: the terminal status finalizing or cancelling leads to. */
  @Column('text', { name: 'end_status', nullable: true }) endStatus: BatchEnd | null;
  @Column('text', { nullable: true, transformer: jsonText }) errors: BatchError[] | null;
  @Column('text', { name: 'output_file_id', nullable: true }) outputFileId: string | null;
  @Column('text', { name: 'error_file_id', nullable: true }) errorFileId: string | null;
  @Column('text', { nullable: true, transformer: jsonText }) metadata: Record<string, string> | null;
  @Column('integer', { name: 'total_count' }) totalCount: number;
  @Column('integer', { name: 'completed_count' }) completedCount: number;
  @Column('integer', { name: 'failed_count' }) failedCount: number;
  @Column('bigint', { name: 'input_tokens', transformer: numeric }) inputTokens: number;
  @Column('bigint', { name: 'cached_tokens', transformer: numeric }) cachedTokens: number;
  @Column('bigint', { name: 'output_tokens', transformer: numeric }) outputTokens: number;
  @Column('bigint', { name: 'total_tokens', transformer: numeric }) totalTokens: number;
  @Column('timestamptz', { name: 'created_at' }) createdAt: Date;
  @Column('timestamptz', { name: 'expires_at' }) expiresAt: Date;
  @Column('timestamptz', { name: 'in_progress_at', nullable: true }) inProgressAt: Date | null;
  @Column('timestamptz', { name: 'finalizing_at', nullable: true }) finalizingAt: Date | null;
  @Column('timestamptz', { name: 'completed_at', nullable: true }) completedAt: Date | null;
  @Column('timestamptz', { name: 'failed_at', nullable: true }) failedAt: Date | null;
  @Column('timestamptz', { name: 'expired_at', nullable: true }) expiredAt: Date | null;
  @Column('timestamptz', { name: 'cancelling_at', nullable: true }) cancellingAt: Date | null;
  @Column('timestamptz', { name: 'cancelled_at', nullable: true }) cancelledAt: Date | null;
  /** The server validating or finalizing it, until then; another takes over once the lease lapses. */
  @Column('text', { name: 'lease_owner', nullable: true }) leaseOwner: string | null;
  @Column('timestamptz', { name: 'lease_expires_at', nullable: true }) leaseExpiresAt: Date | null;
  /**
   * The create request's W3C trace context, when it was traced: each line's run is a trace of its
   * own linked to it, and the batch's webhook continues it (docs/tracing.md).
   */
  @Column('text', { nullable: true }) traceparent: string | null;
}

export type BatchLineStatus = 'pending' | 'running' | 'succeeded' | 'failed';

/**
 * One line (request) of a batch, stored when the batch is validated, so the runners of every
 * server work from the database: pending → running (claimed by a server, under a lease) →
 * succeeded | failed; a running line whose job was lost goes back to pending, at most once.
 */
@Entity('batch_lines')
export class BatchLine {
  @PrimaryColumn('text', { name: 'batch_id' }) batchId: string;
  /** 0-based position in the input file (errors name `line` = this + 1). */
  @PrimaryColumn('integer', { name: 'line_index' }) lineIndex: number;
  @Column('text', { name: 'custom_id' }) customId: string;
  /**
   * Where the request body lies in the batch's input file (the `body` member's JSON text): the
   * runner reads it from the object store when it runs the line, so a batch does not copy its
   * input into the database.
   */
  @Column('bigint', { name: 'body_offset', nullable: true, transformer: nullableNumeric }) bodyOffset: number | null;
  @Column('integer', { name: 'body_length', nullable: true }) bodyLength: number | null;
  /** The body itself, only on lines stored before migration 1765200000000 (still pending or running then). */
  @Column('text', { nullable: true }) body: string | null;
  @Column('text') status: BatchLineStatus;
  /** Times a server started it; a line runs at most twice. */
  @Column('integer') attempts: number;
  @Column('text', { name: 'claimed_by', nullable: true }) claimedBy: string | null;
  @Column('timestamptz', { name: 'lease_expires_at', nullable: true }) leaseExpiresAt: Date | null;
  /** The whole output (or error) file line, JSON, written once with the terminal status. */
  @Column('text', { nullable: true }) result: string | null;
  @Column('integer', { name: 'prompt_tokens' }) promptTokens: number;
  @Column('integer', { name: 'completion_tokens' }) completionTokens: number;
  @Column('integer', { name: 'total_tokens' }) totalTokens: number;
  @Column('timestamptz', { name: 'finished_at', nullable: true }) finishedAt: Date | null;
}
