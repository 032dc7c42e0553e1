import { Column, CreateDateColumn, Entity, PrimaryColumn, PrimaryGeneratedColumn } from 'typeorm';

export const WEBHOOK_EVENT_TYPES = [
  'request.completed', 'request.failed', 'request.canceled', 'webhook.test',
  'batch.completed', 'batch.failed', 'batch.expired', 'batch.cancelled',
  'response.completed', 'response.failed', 'response.cancelled', 'response.incomplete',
] as const;
export type WebhookEventType = (typeof WEBHOOK_EVENT_TYPES)[number];

/** A URL the workspace registered to receive every request event. */
@Entity('webhook_endpoints')
export class WebhookEndpoint {
  @PrimaryColumn('text') id: string;
  @Column('text', { name: 'workspace_id' }) workspaceId: string;
  @Column('text') url: string;
  @Column('text') description: string;
  @Column('boolean') enabled: boolean;
  /** Why it is disabled: by the user, or automatically after consecutive failed deliveries. */
  @Column('text', { name: 'disabled_reason', nullable: true }) disabledReason: string | null;
  /** Deliveries (not attempts) that failed in a row; a success resets it. Test sends never count. */
  @Column('integer', { name: 'consecutive_failures' }) consecutiveFailures: number;
  @CreateDateColumn({ name: 'created_at', type: 'timestamptz' }) createdAt: Date;
  @Column('timestamptz', { name: 'deleted_at', nullable: true }) deletedAt: Date | null;
}

/** One event, written in the same transaction as the state change that caused it (the outbox). */
@Entity('webhook_events')
export class WebhookEvent {
  @PrimaryColumn('text') id: string;
  @Column('text', { name: 'workspace_id' }) workspaceId: string;
  @Column('text') type: WebhookEventType;
  /** The exact body every attempt sends: `{id, type, data}`, serialised once. */
  @Column('text') body: string;
  /** The record the event is about: a request record's id, or a batch's (`batch_…`) for batch events. */
  @Column('text', { name: 'request_id', nullable: true }) requestId: string | null;
  @Column('timestamptz', { name: 'created_at' }) createdAt: Date;
  /** The trace context of the record the event is about (its submission's), when it was traced: each delivery attempt is a span of that trace. */
  @Column('text', { nullable: true }) traceparent: string | null;
}

export type DeliveryStatus = 'pending' | 'delivering' | 'succeeded' | 'failed';

/** One event to one URL: the unit that is retried, logged, and counted against an endpoint. */
@Entity('webhook_deliveries')
export class WebhookDelivery {
  @PrimaryColumn('text') id: string;
  @Column('text', { name: 'event_id' }) eventId: string;
  @Column('text', { name: 'workspace_id' }) workspaceId: string;
  /** The request's own webhook_url, a registered endpoint, or a test send to an endpoint. */
  @Column('text', { name: 'target' }) target: 'request_url' | 'endpoint' | 'test';
  @Column('text', { name: 'endpoint_id', nullable: true }) endpointId: string | null;
  @Column('text') url: string;
  @Column('text') status: DeliveryStatus;
  @Column('integer') attempts: number;
  @Column('timestamptz', { name: 'next_attempt_at' }) nextAttemptAt: Date;
  /** A delivering row whose server died is due again once this passes (at-least-once). */
  @Column('timestamptz', { name: 'lease_expires_at', nullable: true }) leaseExpiresAt: Date | null;
  @Column('integer', { name: 'last_status_code', nullable: true }) lastStatusCode: number | null;
  @Column('text', { name: 'last_error', nullable: true }) lastError: string | null;
  @Column('timestamptz', { name: 'created_at' }) createdAt: Date;
  @Column('timestamptz', { name: 'completed_at', nullable: true }) completedAt: Date | null;
}

/** Every attempt of every delivery, test sends included: what was sent and what came back. */
@Entity('webhook_attempts')
export class WebhookAttempt {
  @PrimaryGeneratedColumn('identity', { type: 'bigint' }) id: string;
  @Column('text', { name: 'delivery_id' }) deliveryId: string;
  @Column('text', { name: 'workspace_id' }) workspaceId: string;
  @Column('integer') attempt: number;
  @Column('text') url: string;
  @Column('integer', { name: 'status_code', nullable: true }) statusCode: number | null;
  @Column('text', { nullable: true }) error: string | null;
  @Column('integer', { name: 'latency_ms' }) latencyMs: number;
  @Column('boolean') succeeded: boolean;
  /** The body sent, byte for byte, and its signature header. */
  @Column('text', { name: 'request_body' }) requestBody: string;
  @Column('text') signature: string;
  @Column('timestamptz', { name: 'created_at' }) createdAt: Date;
}

/** The workspace's signing secret, sealed; after a rotation the previous one also signs until it expires. */
@Entity('webhook_signing_secrets')
export class WebhookSigningSecret {
  @PrimaryColumn('text', { name: 'workspace_id' }) workspaceId: string;
  @Column('bytea', { name: 'current_ciphertext' }) currentCiphertext: Buffer;
  @Column('timestamptz', { name: 'rotated_at' }) rotatedAt: Date;
  @Column('bytea', { name: 'previous_ciphertext', nullable: true }) previousCiphertext: Buffer | null;
  @Column('timestamptz', { name: 'previous_expires_at', nullable: true }) previousExpiresAt: Date | null;
}
