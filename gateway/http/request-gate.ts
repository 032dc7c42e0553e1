import type { IncomingMessage, ServerResponse } from 'node:http';
import { AppError } from '../../control-plane/api/errors';
import type { AuthenticatedKey, Deployment, InferencePipeline, TenantBudget } from '../../control-plane/api/inference';
import type { ConnectionBudget } from './connection-budget';
import { RequestBudget } from './request-budget';

/**
 * The one step every request with a key takes once its key (and deployment) is known and
 * before a byte of its body is read: its connection stops counting as anonymous, it takes its
 * share of the tenant budget (request-budget.ts), and work that spends is refused on what the
 * key and deployment alone decide (credit, pause, a full minute or day: the pipeline's
 * refusalBeforeBody). A surface added later gets all of it by calling `enter`.
 */
export class RequestGate {
  constructor(
    private readonly budget: TenantBudget,
    private readonly pipeline: Pick<InferencePipeline, 'refusalBeforeBody'>,
    private readonly connections: Pick<ConnectionBudget, 'identified'> | null,
    /** Bodies up to this size are not counted in the memory budget (request-budget.ts). */
    private readonly bodyThresholdBytes: number,
  ) {}

  /** A connection showed a valid key (a graphql-ws socket's connection_init): it no longer counts as its address's anonymous one. */
  identified(socket: IncomingMessage['socket']): void {
    this.connections?.identified(socket);
  }

  /** The request's budget (released when `response` closes); throws the refusal. */
  enter(request: IncomingMessage, response: ServerResponse, key: AuthenticatedKey, deployment: Deployment | null = null, spends?: 'text' | 'media'): RequestBudget {
    this.connections?.identified(request.socket);
    // First, so that a key refused anyway (no credit) holds nothing, not even a request in flight.
    // A retried media submission (same Idempotency-Key) gets its record back whatever the key's state now: admission decides after the body.
    this.refuseBeforeBody(request, key, deployment, spends);
    const held = RequestBudget.admit(this.budget, { keyId: key.id, workspaceId: key.workspaceId }, response, this.bodyThresholdBytes);
    if (held instanceof AppError) throw held;
    return held;
  }

  /**
   * The workspace base URL (`/v1/…`) learns the deployment from the body's `model`, after
   * `enter` ran without one: what the deployment alone refuses (paused) is decided now, before
   * its handler runs, as `enter` decides it before the body on the deployment's own URL.
   */
  routed(request: IncomingMessage, key: AuthenticatedKey, deployment: Deployment, spends?: 'text' | 'media'): void {
    this.refuseBeforeBody(request, key, deployment, spends);
  }

  private refuseBeforeBody(request: IncomingMessage, key: AuthenticatedKey, deployment: Deployment | null, spends: 'text' | 'media' | undefined): void {
    if (spends && !(spends === 'media' && request.headers['idempotency-key'])) {
      const refusal = this.pipeline.refusalBeforeBody(key, deployment, spends);
      if (refusal) throw refusal;
    }
  }
}
