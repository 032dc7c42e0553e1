import type { Logger } from 'pino';
import type { AuthenticatedKey } from '../api-keys/api-key.service';
import type { SlotHold } from '../dispatch/agent-connection';
import type { Dispatcher } from '../dispatch/dispatcher';
import type { DispatchRequest, Job, JobListener } from '../dispatch/job';
import { AppError } from '../errors/app-error';
import { newId } from '../ids';
import type { GuestPlacement, PricedModel, SharedModel, SharedPool } from './shared-pool';
import type { RelayClient } from '../cluster/relay-client';
import type { SharingConfig } from './sharing-config';
import type { SharedPrices } from '../deployments/sharing-eligibility';
import { GuestFairness } from './guest-fairness';
import type { SharedAdapter, SharedAdapters } from './shared-adapters';
import type { AdapterRef } from '../../proto/worker/v1';

/** The model id prefix of the shared endpoint: `shared/<catalog model id>`. */
export const SHARED_MODEL_PREFIX = 'shared/';

const NAMES = new WeakMap<PricedModel, string>();

/**
 * `shared/<model-id>`, or `shared/<adapter id>` for an owner's adapter, built once per model
 * object (a guest flood's metrics label it on every attempt).
 */
export function sharedModelName(model: PricedModel): string {
  let name = NAMES.get(model);
  if (name === undefined) NAMES.set(model, name = `${SHARED_MODEL_PREFIX}${model.adapter ? model.adapter.id : model.modelId}`);
  return name;
}

/** A hold on the guest's prepaid credit (none for a postpaid guest); see billing/guest-credit.ts. */
export interface Reservation {
  id: string;
  workspaceId: string;
  amount: string;
  prepaid: boolean;
}

/**
 * What shared serving needs of billing: a screen in memory, a hold at admission (in memory
 * when the guest's lease has room, a Promise when it must grow), settle on usage, release on
 * failure (billing/guest-credit.ts; settle and release may answer later).
 */
export interface GuestBilling {
  /** False when the guest's credit surely cannot hold the request's worst case: 402 without a database round trip. */
  screen(guestWorkspaceId: string, maxPromptTokens: number, maxCompletionTokens: number, prices: SharedPrices): boolean;
  reserve(guestWorkspaceId: string, maxPromptTokens: number, maxCompletionTokens: number, prices: SharedPrices, ttlMs: number): Reservation | null | Promise<Reservation | null>;
  settle(reservation: Reservation, usage: {
    sharedRequestId: string; ownerWorkspaceId: string; deploymentId: string; modelId: string; promptTokens: number; completionTokens: number;
  }, prices: SharedPrices): unknown;
  release(reservation: Reservation): unknown;
}

/** One admitted guest request: where it runs, what it may cost, and the body the engine gets. */
export interface GuestAdmission {
  readonly id: string;
  readonly model: PricedModel;
  /** The guest's workspace (its fair share of the pool is counted until the request finishes). */
  readonly workspaceId: string;
  /** Where it runs: a replica whose agent this server holds, or one on a peer (relayed). */
  readonly target: Placed;
  /** The owner's deployment and workspace, credited what the guest pays. */
  readonly deploymentId: string;
  readonly ownerWorkspaceId: string;
  readonly reservation: Reservation;
  /** The body the engine gets: bounded (the pipeline wrote `defaultMaxTokens` into one that set no bound). */
  readonly body: Buffer;
  /** The local slot, held from admission until the job is on the agent (or never will be). */
  readonly slot: SlotHold | null;
}

export interface GuestUsage {
  promptTokens: number;
  completionTokens: number;
}

/** A placement with a slot (here, or on a peer). */
type Placed = Exclude<GuestPlacement, { kind: 'busy' } | { kind: 'unavailable' }>;

/** Why a guest was refused before anything costly: each answer is built once per model and thrown again. */
type Refusal = 'unavailable' | 'busy' | 'fair' | 'credit' | 'exhausted';

/**
 * The guest side of shared serving: admission (model, pool, fair share, credit), dispatch at
 * guest priority, and settlement. A refusal costs no database round trip and no body parse:
 * `refusalNow` decides in memory what `admit` would refuse (the pipeline calls it with the
 * completion bound of the few fields a scan of the raw body found), and its errors are built
 * once per model. `admit` decides again after the body was parsed (the pool moves meanwhile) and
 * holds the credit, in memory while the guest's lease has room (billing/guest-credit.ts).
 */
export class SharedServing {
  /** By the model's identity (SharedPool.priced keeps one per catalog model), so a refusal builds no key. */
  private readonly refusals = new WeakMap<PricedModel, Partial<Record<Refusal, AppError>>>();
  private sequence = 0;
  /** Shared request ids: random per process (72 bits), then a counter; each keys its ledger rows, so they must never repeat. */
  private readonly idPrefix = `${newId('shr', 9)}_`;

  constructor(
    private readonly pool: SharedPool,
    private readonly dispatcher: Dispatcher,
    private readonly billing: GuestBilling,
    private readonly config: SharingConfig,
    private readonly logger: Logger,
    /** Runs a job on a peer's replica (cluster.v1); without it guests only reach this server's replicas. */
    private readonly relay: Pick<RelayClient, 'run'> | null = null,
    private readonly fairness: GuestFairness = new GuestFairness({ contendWindowMs: config.fairShareWindowMs ?? 1_000 }),
    /** Owners' adapters offered to guests (adapters/); without it `shared/<adapter id>` is an unknown model. */
    private readonly adapters: SharedAdapters | null = null,
  ) {}

  /** Every shareable catalog model, then every shared adapter whose base model is one. */
  models(): SharedModel[] {
    const models = this.pool.models();
    for (const adapter of this.adapters?.all() ?? []) {
      const priced = this.pricedAdapter(adapter);
      if (priced) models.push(this.pool.adapterModel(priced));
    }
    return models;
  }

  /** The job's AdapterRef of a guest request for a shared adapter (its weights' link valid until the deadline); null for a base model. */
  async adapterRef(model: PricedModel, deadlineUnixMs: number): Promise<AdapterRef | null> {
    if (!model.adapter || !this.adapters) return null;
    return await this.adapters.ref(model.adapter, deadlineUnixMs);
  }

  /** One object per shared adapter snapshot (its label and refusals are kept by identity); null when its base model is not shareable. */
  private readonly pricedAdapters = new WeakMap<SharedAdapter, (PricedModel & { adapter: SharedAdapter }) | null>();

  private pricedAdapter(adapter: SharedAdapter): (PricedModel & { adapter: SharedAdapter }) | null {
    let priced = this.pricedAdapters.get(adapter);
    if (priced === undefined) {
      const base = this.pool.priced(adapter.baseModel);
      priced = base ? { modelId: base.modelId, prices: base.prices, adapter } : null;
      this.pricedAdapters.set(adapter, priced);
    }
    return priced;
  }

  /**
   * `max_tokens` a guest request gets when it sets no bound (`SHARED_DEFAULT_MAX_TOKENS`): its
   * credit hold needs a bound the engine keeps to. The pipeline writes it into the body before
   * any hold is taken (pipeline/completion-bound.ts), so every hold counts the same bound.
   */
  get defaultMaxTokens(): number {
    return this.config.defaultGuestMaxTokens;
  }

  /**
   * `shared/<model-id>` → the shareable model and its prices; `shared/<adapter id>` → an owner's
   * shared adapter, priced as its base model (docs/adapters.md#sharing); 400 or 404 naming the
   * field otherwise. An adapter that is not shared (any more) is a 404 exactly as a made-up id.
   */
  resolve(id: unknown, param = 'model'): PricedModel {
    if (typeof id !== 'string' || !id.startsWith(SHARED_MODEL_PREFIX)) {
      throw new AppError('invalid_request', `${param} must be "shared/<model-id>"; GET /shared/v1/models lists them`, { param });
    }
    const name = id.slice(SHARED_MODEL_PREFIX.length);
    const model = this.pool.priced(name) ?? this.sharedAdapter(name);
    if (!model) throw new AppError('model_not_found', `no shared model '${id}'; GET /shared/v1/models lists them`, { param });
    return model;
  }

  /** `shared/<model-id>` (or `shared/<adapter id>`) → the shared model with its availability now. */
  model(id: unknown, param = 'model'): SharedModel {
    const model = this.resolve(id, param);
    return model.adapter ? this.pool.adapterModel(model as PricedModel & { adapter: SharedAdapter }) : this.pool.model(model.modelId)!;
  }

  private sharedAdapter(adapterId: string): PricedModel | null {
    const adapter = this.adapters?.find(adapterId);
    return adapter ? this.pricedAdapter(adapter) : null;
  }

  /**
   * In memory, before the body is parsed, the refusal `admit` would answer now, or null: 503
   * when no provider is left, 429 when no replica has an idle guest slot or the guest holds its
   * fair share while others wait (guest-fairness.ts), 402 when the guest's workspace has no
   * credit left (the key cache's flag) or its credit surely cannot hold the request's worst case
   * (`bodyBytes` of prompt and `maxCompletionTokens`, the pipeline's completion bound of the few
   * fields a scan of the raw body found). Returned, not thrown: a flood is mostly refusals, and a
   * throw cost more than the rest of the screen.
   */
  refusalNow(key: Pick<AuthenticatedKey, 'workspaceId' | 'creditExhausted'>, model: PricedModel, maxCompletionTokens: number, bodyBytes: number): AppError | null {
    const placement = this.placeOrRefuse(key.workspaceId, model);
    if (placement instanceof AppError) return placement;
    if (key.creditExhausted) return this.refusal('exhausted', model);
    if (!this.billing.screen(key.workspaceId, bodyBytes, maxCompletionTokens, model.prices)) return this.refusal('credit', model);
    return null;
  }

  /**
   * Admits a guest's chat request or throws: 503 when no provider is left, 429 when no replica
   * has an idle guest slot (or the guest holds its fair share while others wait), 402 when the
   * guest's credit cannot hold the worst-case cost: the body's bytes of prompt and
   * `maxCompletionTokens` (the pipeline's completion bound of the bounded body). The rules every
   * request shares (a workspace without credit, rate limits) the pipeline applied. The local slot
   * stays held until `dispatch` (or `finish`, for a request that never ran), so no other guest
   * takes it meanwhile. A guest's request for an owner's LoRA adapter (`model.adapter`) is
   * placed only on replicas with adapter slots of the deployments it is attached to.
   */
  async admit(key: Pick<AuthenticatedKey, 'workspaceId'>, model: PricedModel, maxCompletionTokens: number, body: Buffer): Promise<GuestAdmission> {
    const placement = this.place(key.workspaceId, model);
    // A peer's slot is checked again by the peer when the job arrives (429 if it is gone).
    const connection = placement.kind === 'replica' ? placement.connection : null;
    const slot = connection?.reserveSlot() ?? null;
    let reservation: Reservation | null;
    try {
      const held = this.billing.reserve(key.workspaceId, body.length, maxCompletionTokens, model.prices, this.config.reservationTtlMs);
      reservation = held instanceof Promise ? await held : held;
    } catch (error) {
      slot?.release();
      throw error;
    }
    if (!reservation) {
      slot?.release();
      throw this.refusal('credit', model);
    }
    if (connection?.closed || connection?.draining) {
      slot?.release();
      await this.billing.release(reservation);
      this.refused(key.workspaceId, model);
      throw this.refusal('busy', model);
    }
    this.pool.trafficOf(model.modelId).admitted();
    this.fairness.admitted(model.modelId, key.workspaceId);
    const owner = placement.kind === 'replica'
      ? { deploymentId: placement.connection.deploymentId, ownerWorkspaceId: placement.connection.workspaceId }
      : { deploymentId: placement.deploymentId, ownerWorkspaceId: placement.ownerWorkspaceId };
    const id = `${this.idPrefix}${(this.sequence++).toString(36)}`;
    return { id, model, workspaceId: key.workspaceId, target: placement, ...owner, reservation, body, slot };
  }

  dispatch(admission: GuestAdmission, request: Omit<DispatchRequest, 'deploymentId' | 'body' | 'guest' | 'model'>, listener: JobListener): Job {
    const job = { ...request, deploymentId: admission.deploymentId, body: admission.body, model: admission.model.modelId, guest: true };
    const { target } = admission;
    admission.slot?.release();
    if (target.kind === 'replica') return this.dispatcher.dispatchTo(target.connection, job, listener);
    if (!this.relay) throw this.refusal('busy', admission.model);
    return this.relay.run(target.peer, job, listener);
  }

  /**
   * Charges the request its usage (the owner is credited the same) when it succeeded or ended
   * early (the client left, stalled or ran out of time: it was sent tokens, counted by the
   * engine, else by the agent from what it relayed), and releases the hold of one that never ran
   * or failed on the platform's side, which costs nothing. Aborted streams were free before: 3
   * streams of 15,041 delivered tokens each left the guest's balance unchanged. The charge is
   * decided here and written with the next batch (billing/guest-credit.ts); the guest's fair
   * share counts the request until now.
   */
  async finish(admission: GuestAdmission, outcome: 'succeeded' | 'failed' | 'canceled', usage: GuestUsage | undefined): Promise<void> {
    admission.slot?.release();
    this.fairness.finished(admission.model.modelId, admission.workspaceId);
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

  /** A replica with an idle guest slot the guest may take, or the refusal (counted by the pool's availability and the fairness rule). */
  private place(workspaceId: string, model: PricedModel): Placed {
    const placement = this.placeOrRefuse(workspaceId, model);
    if (placement instanceof AppError) throw placement;
    return placement;
  }

  private placeOrRefuse(workspaceId: string, model: PricedModel): Placed | AppError {
    const placement = this.pool.place(model.modelId, model.adapter !== undefined, model.adapter?.deploymentIds);
    if (placement.kind === 'unavailable') return this.refusal('unavailable', model);
    if (placement.kind === 'busy') {
      this.refused(workspaceId, model);
      return this.refusal('busy', model);
    }
    if (!this.fairness.allows(model.modelId, workspaceId, placement.idleSlots)) {
      this.refused(workspaceId, model);
      return this.refusal('fair', model);
    }
    return placement;
  }

  private refused(workspaceId: string, model: PricedModel): void {
    this.pool.trafficOf(model.modelId).refused();
    this.fairness.refused(model.modelId, workspaceId);
  }

  /** The refusal's error, built once per model and reason (no stack capture, no message built per refused request). */
  private refusal(reason: Refusal, model: PricedModel): AppError {
    let built = this.refusals.get(model);
    if (!built) this.refusals.set(model, built = {});
    let error = built[reason];
    if (!error) {
      const name = sharedModelName(model);
      const retryAfterSeconds = this.config.busyRetryAfterSeconds;
      error = {
        unavailable: () => new AppError('shared_model_unavailable', `every provider of '${name}' has left the shared pool; your key stays valid, retry later`, { retryAfterSeconds: 30 }),
        busy: () => new AppError('shared_pool_busy', `the shared pool of '${name}' has no idle capacity now; retry shortly`, { retryAfterSeconds }),
        fair: () => new AppError('shared_pool_busy',
          `the shared pool of '${name}' has no idle capacity for this workspace now: other guests are waiting and this workspace holds its fair share of the pool; retry shortly`,
          { retryAfterSeconds }),
        credit: () => new AppError('insufficient_quota', 'the workspace\'s credit cannot cover this request at the shared model\'s prices (prompt + max_tokens); add credit or lower max_tokens'),
        // The words of pipeline/admission.ts's refuseWithoutCredit, built once.
        exhausted: () => new AppError('insufficient_quota', 'the workspace has no credit left; add credit to continue'),
      }[reason]();
      built[reason] = error;
    }
    return error;
  }
}
