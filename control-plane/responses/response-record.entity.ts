import { Column, Entity, PrimaryColumn } from 'typeorm';
import type { ResponseItem, ResponseSettings, ResponseStatus, ResponseUsage, ResponsesRequest } from './response-items';

/**
 * One stored response (`resp_<hex>`) of the Responses API, scoped to its workspace and
 * deployment. `history` holds every item of its chain before this turn (copied from the
 * previous response when it was created), so continuing a chain of any length is one lookup by
 * primary key, and deleting a response in the middle of a chain leaves the later ones whole.
 */
@Entity('responses')
export class ResponseRecord {
  @PrimaryColumn('text') id: string;
  @Column('text', { name: 'workspace_id' }) workspaceId: string;
  @Column('text', { name: 'deployment_id' }) deploymentId: string;
  @Column('text', { name: 'api_key_id' }) apiKeyId: string;
  @Column('text') model: string;
  @Column('text') status: ResponseStatus;
  @Column('boolean') background: boolean;
  @Column('text', { name: 'previous_response_id', nullable: true }) previousResponseId: string | null;
  @Column('jsonb') settings: ResponseSettings;
  @Column('jsonb') history: ResponseItem[];
  @Column('jsonb') input: ResponseItem[];
  @Column('jsonb') output: ResponseItem[];
  @Column('jsonb', { nullable: true }) usage: ResponseUsage | null;
  @Column('jsonb', { nullable: true }) error: { code: string; message: string } | null;
  @Column('jsonb', { name: 'incomplete_details', nullable: true }) incompleteDetails: { reason: string } | null;
  @Column('timestamptz', { name: 'created_at' }) createdAt: Date;
  @Column('timestamptz', { name: 'completed_at', nullable: true }) completedAt: Date | null;
  /** When the retention sweep deletes it (RESPONSES_RETENTION_DAYS after creation). */
  @Column('timestamptz', { name: 'expires_at' }) expiresAt: Date;
  /** A background response's create request as parsed (a server that never saw it runs it from this); null otherwise. */
  @Column('jsonb', { nullable: true }) request: ResponsesRequest | null;
  /** The server running a background response; it renews the lease while the turn runs. */
  @Column('text', { name: 'lease_owner', nullable: true }) leaseOwner: string | null;
  @Column('timestamptz', { name: 'lease_expires_at', nullable: true }) leaseExpiresAt: Date | null;
  /** How many times a background response was started (a server that died mid-turn leaves it to be run again). */
  @Column('integer') attempts: number;
  /** A background response's create request's W3C trace context, when it was traced: its runs and its webhook continue that trace. */
  @Column('text', { nullable: true }) traceparent: string | null;
}
