import type { Logger } from 'pino';
import type { AuthenticatedKey } from '../api-keys/api-key.service';
import type { Dispatcher } from '../dispatch/dispatcher';
import type { DispatchRequest, Job, JobListener } from '../dispatch/job';
import { AppError } from '../errors/app-error';
import { newId } from '../ids';
import type { GuestPlacement, PricedModel, SharedModel, SharedPool } from './shared-pool';
import type { RelayClient } from '../cluster/relay-client';
import type { SharingConfig } from './sharing-config';
import type { SharedPrices } from '../deployments/sharing-eligibility';

/** The model id prefix of the shared endpoint: `shared/<catalog model id>`. */
export const SHARED_MODEL_PREFIX = 'shared/';

/** A hold on the guest's prepaid credit (none for a postpaid guest); see SharedBilling. */
export interface Reservation {
  id: string;
  workspaceId: string;
  amount: string;
  prepaid: boolean;
}

/** What shared serving needs of billing: hold at admission, settle on usage, release on failure. */
export interface GuestBilling {
  reserve(guestWorkspaceId: string, maxPromptTokens: number, maxCompletionTokens: number, prices: SharedPrices, ttlMs: number): Promise<Reservation | null>;
  settle(reservation: Reservation, usage: {
    sharedRequestId: string; ownerWorkspaceId: string; deploymentId: string; modelId: string; promptTokens: number; completionTokens: number;
  }, prices: SharedPrices): Promise<string>;
  release(reservation: Reservation): Promise<void>;
}

/** One admitted guest request: where it runs, what it may cost, and the body the engine gets. */
export interface GuestAdmission {
  readonly id: string;
  readonly model: PricedModel;
  /** Where it runs: a replica whose agent this server holds, or one on a peer (relayed). */
  readonly target: Exclude<GuestPlacement, { kind: 'busy' } | { kind: 'unavailable' }>;
  /** The owner's deployment and workspace, credited what the guest pays. */
  readonly deploymentId: string;
  readonly ownerWorkspaceId: string;
  readonly reservation: Reservation;
  /** The client's body, with `max_tokens` added when it sent no bound (the reservation needs one). */
  readonly body: Buffer;
}

export interface GuestUsage {
  promptTokens: number;
  completionTokens: number;
}

/**
 * The guest side of shared serving: admission (model, pool, credit), dispatch at guest
 * priority, and settlement. Admission order keeps a flood of refusals cheap: the pool is
 * checked (in memory) before credit is reserved (a database write).
 */
export class SharedServing {
  constructor(
    private readonly pool: SharedPool,
    private readonly dispatcher: Dispatcher,
    private readonly billing: GuestBilling,
    private readonly config: SharingConfig,
    private readonly logger: Logger,
    /** Runs a job on a peer's replica (cluster.v1); without it guests only reach this server's replicas. */
    private readonly relay: Pick<RelayClient, 'run'> | null = null,
  ) {}

  models(): SharedModel[] {
    return this.pool.models();
  }

  /** `shared/<model-id>` → the shareable model and its prices; 400 or 404 naming the field otherwise. */
  resolve(id: unknown, param = 'model'): PricedModel {
    if (typeof id !== 'string' || !id.startsWith(SHARED_MODEL_PREFIX)) {
      throw new AppError('invalid_request', `${param} must be "shared/<model-id>"; GET /shared/v1/models lists them`, { param });
    }
    const model = this.pool.priced(id.slice(SHARED_MODEL_PREFIX.length));
    if (!model) throw new AppError('model_not_found', `no shared model '${id}'; GET /shared/v1/models lists them`, { param });
    return model;
  }

  /** `shared/<model-id>` → the shared model with its availability now. */
  model(id: unknown, param = 'model'): SharedModel {
    return this.pool.model(this.resolve(id, param).modelId)!;
  }

  /**
   * Admits a guest's chat request or throws: 503 when no provider is left, 429 when no replica
   * has an idle guest slot, 402 when the guest's credit cannot hold the worst-case cost. The
   * rules every request shares (a workspace without credit, rate limits) the pipeline applied.
   */
  async admit(key: Pick<AuthenticatedKey, 'workspaceId'>, model: PricedModel, fields: Record<string, unknown>, body: Buffer): Promise<GuestAdmission> {
    const traffic = this.pool.trafficOf(model.modelId);
    const placement = this.pool.place(model.modelId);
    if (placement.kind === 'unavailable') {
      throw new AppError('shared_model_unavailable', `every provider of '${SHARED_MODEL_PREFIX}${model.modelId}' has left the shared pool; your key stays valid, retry later`, { retryAfterSeconds: 30 });
    }
    if (placement.kind === 'busy') {
      traffic.refused();
      throw this.busy(model);
    }
    const { maxCompletionTokens, rewritten } = this.completionBound(fields, body);
    // A local slot is held while credit is reserved, so two guests cannot both take the last
    // one; a peer's slot is checked again by the peer when the job arrives (429 if it is gone).
    const connection = placement.kind === 'replica' ? placement.connection : null;
    const slot = connection?.reserveSlot();
    let reservation: Reservation | null;
    try {
      reservation = await this.billing.reserve(key.workspaceId, rewritten.length, maxCompletionTokens, model.prices, this.config.reservationTtlMs);
    } finally {
      slot?.release();
    }
    if (!reservation) {
      throw new AppError('insufficient_quota', 'the workspace\'s credit cannot cover this request at the shared model\'s prices (prompt + max_tokens); add credit or lower max_tokens');
    }
    if (connection?.closed || connection?.draining) {
      await this.billing.release(reservation);
      traffic.refused();
      throw this.busy(model);
    }
    traffic.admitted();
    const owner = placement.kind === 'replica'
      ? { deploymentId: placement.connection.deploymentId, ownerWorkspaceId: placement.connection.workspaceId }
      : { deploymentId: placement.deploymentId, ownerWorkspaceId: placement.ownerWorkspaceId };
    return { id: newId('shr'), model, target: placement, ...owner, reservation, body: rewritten };
  }

  dispatch(admission: GuestAdmission, request: Omit<DispatchRequest, 'deploymentId' | 'body' | 'guest' | 'model'>, listener: JobListener): Job {
    const job = { ...request, deploymentId: admission.deploymentId, body: admission.body, model: admission.model.modelId, guest: true };
    const { target } = admission;
    if (target.kind === 'replica') return this.dispatcher.dispatchTo(target.connection, job, listener);
    if (!this.relay) throw this.busy(admission.model);
    return this.relay.run(target.peer, job, listener);
  }

  /**
   * Charges the request its usage (the owner is credited the same, in one transaction) when it
   * succeeded or ended early (the client left, stalled or ran out of time: it was sent tokens,
   * counted by the engine, else by the agent from what it relayed), and releases the hold of one
   * that never ran or failed on the platform's side, which costs nothing. Aborted streams were
   * free before: 3 streams of 15,041 delivered tokens each left the guest's balance unchanged.
   */
  async finish(admission: GuestAdmission, outcome: 'succeeded' | 'failed' | 'canceled', usage: GuestUsage | undefined): Promise<void> {
    try {
      if (outcome === 'failed' || !usage || usage.promptTokens + usage.completionTokens === 0) {
        await this.billing.release(admission.reservation);
        return;
      }
      await this.billing.settle(admission.reservation, {
        sharedRequestId: admission.id, ownerWorkspaceId: admission.ownerWorkspaceId, deploymentId: admission.deploymentId,
        modelId: admission.model.modelId, promptTokens: usage.promptTokens, completionTokens: usage.completionTokens,
      }, admission.model.prices);
    } catch (error) {
      // The hold expires by itself; the request's id is in the log for a manual settlement.
      this.logger.error({ err: error, sharedRequestId: admission.id }, 'could not settle a guest request');
    }
  }

  /** The guest's first byte left `ms` after its request arrived (the pool's time-to-first-token measure). */
  firstToken(admission: GuestAdmission, ms: number): void {
    this.pool.trafficOf(admission.model.modelId).firstToken(ms);
  }

  private busy(model: PricedModel): AppError {
    return new AppError('shared_pool_busy',
      `the shared pool of '${SHARED_MODEL_PREFIX}${model.modelId}' has no idle capacity now; retry shortly`, { retryAfterSeconds: this.config.busyRetryAfterSeconds });
  }

  /**
   * The most completion tokens the request can produce: `max_completion_tokens` or
   * `max_tokens`, times `n`. Without either, `max_tokens` is set to the configured default so
   * the reservation bounds the cost (the engine would otherwise run to the context length).
   */
  private completionBound(fields: Record<string, unknown>, body: Buffer): { maxCompletionTokens: number; rewritten: Buffer } {
    const n = typeof fields.n === 'number' ? fields.n : 1;
    const given = (fields.max_completion_tokens ?? fields.max_tokens) as number | undefined | null;
    if (typeof given === 'number') return { maxCompletionTokens: given * n, rewritten: body };
    const bound = this.config.defaultGuestMaxTokens;
    return { maxCompletionTokens: bound * n, rewritten: Buffer.from(JSON.stringify({ ...fields, max_tokens: bound })) };
  }
}
