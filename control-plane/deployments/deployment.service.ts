import { quoteValue } from '../errors/quote-value';
import { DEFAULT_ROUTING_POLICY, ROUTING_POLICIES, type RoutingPolicyName } from '../placement/placement-policy';
import { randomBytes } from 'node:crypto';
import type { QueryDeepPartialEntity } from 'typeorm/query-builder/QueryPartialEntity';
import type { Catalog } from '../catalog/catalog';
import { AppError } from '../errors/app-error';
import { newId } from '../ids';
import { hashSecret, newSecret } from '../secrets';
import { Deployment, PROVIDER_KINDS, type DeploymentStatus, type ProviderKind } from './deployment.entity';
import type { DeploymentStore } from './deployment-store';
import { assertTransition } from './deployment-transitions';
import { assertShareable } from './sharing-eligibility';
import type { DeploymentBudget } from './deployment-budget';
import { shortened } from '../errors/quote-value';
import { loraSettingsOf, type LoraSettings } from './lora-settings';
import { scalesToZero } from './scaled-to-zero';
import type { AttachedAdapterNeeds } from './attached-adapter-needs';
import { scalingSettingsOf, type ScalingChanges } from './scaling-settings';

/** Statuses in which a deployment's settings may change. */
const EDITABLE: readonly DeploymentStatus[] = ['Creating', 'Running', 'Paused'];

export interface CreateDeploymentInput {
  modelId: string;
  priceCapPerHour: number;
  minReplicas: number;
  maxReplicas: number;
  autoscale: boolean;
  provider?: ProviderKind;
  /** Image/video models: default output bucket (a verified storage credential); null or absent = Managed. */
  storageCredentialId?: number | null;
  /** Open idle capacity to guests of shared serving (eligible chat models only). @default false */
  shareIdleCapacity?: boolean;
  /** How requests pick a replica: `prefix-aware` (default), `least-loaded` or `round-robin`. */
  routingPolicy?: string | null;
  /** LoRA capacity (lora-settings.ts); absent: the defaults. Engines read it at start. */
  maxLoras?: number | null;
  maxCpuLoras?: number | null;
  maxLoraRank?: number | null;
  /** Autoscaling policy, SLO, scale to zero and its queue (scaling-settings.ts); absent: the defaults. */
  scalingPolicy?: ScalingChanges['scalingPolicy'];
  slo?: ScalingChanges['slo'];
  scaleToZeroAfterSeconds?: ScalingChanges['scaleToZeroAfterSeconds'];
  coldStartQueueLimit?: ScalingChanges['coldStartQueueLimit'];
}

export interface DeploymentChanges extends ScalingChanges {
  priceCapPerHour?: number;
  minReplicas?: number;
  maxReplicas?: number;
  autoscale?: boolean;
  /** null switches back to Managed storage. */
  storageCredentialId?: number | null;
  /** true starts the rolling restart that opens idle capacity to guests; false stops new guest work at once. */
  shareIdleCapacity?: boolean;
  routingPolicy?: string | null;
  /** Engines read these at start: replicas placed from now on get them; running ones keep theirs until replaced. */
  maxLoras?: number | null;
  maxCpuLoras?: number | null;
  maxLoraRank?: number | null;
}

/** The replica manager's side (replicas/replica-manager.ts): places a deployment's wanted replicas, or ends them all. */
export interface DeploymentReplicas {
  ensure(deployment: Deployment): Promise<void>;
  release(deployment: Deployment, reason: string): Promise<void>;
}

/**
 * What a deleted deployment leaves beyond its replicas (batches/batch-deletion.ts): its batches
 * are cancelled and its files deleted. Run before the replicas go, so its running batch lines
 * end cancelled rather than lost.
 */
export interface DeploymentBatches {
  deploymentDeleted(workspaceId: string, deploymentId: string): Promise<void>;
}

/** Checks that a storage credential is a verified one of the workspace (422 otherwise). */
export interface StorageCheck {
  check(workspaceId: string, storageCredentialId: number | null): Promise<void>;
}

/** Upper bounds that keep a typo from renting a fleet. */
export const MAX_REPLICAS = 64;
export const MAX_PRICE_CAP_PER_HOUR = 1_000;

export class DeploymentService {
  constructor(
    private readonly store: DeploymentStore,
    private readonly replicas: DeploymentReplicas,
    private readonly catalog: Catalog,
    private readonly storage: StorageCheck,
    private readonly batches: DeploymentBatches,
    /** The tenant budget's say on a new deployment; none (tests of other rules): every one is allowed. */
    private readonly budget: Pick<DeploymentBudget, 'checkProvider' | 'holdDeployment'> | null = null,
    /** The adapters attached to a deployment, which its LoRA settings must keep fitting; none (tests of other rules): not checked. */
    private readonly adapterNeeds: Pick<AttachedAdapterNeeds, 'of'> | null = null,
  ) {}

  /** Creates the deployment and places its minimum replicas; `joinToken` only for external ones. */
  async create(workspaceId: string, input: CreateDeploymentInput): Promise<{ deployment: Deployment; joinToken: string | null }> {
    const model = this.catalog.get(input.modelId);
    if (!this.catalog.isEnabled(model.id)) {
      throw new AppError('model_not_found', `model '${model.id}' is disabled in the catalog; see the catalog query for the available models`, { param: 'modelId' });
    }
    validateSettings(input);
    const lora = loraSettingsOf(input);
    const scaling = scalingSettingsOf(model, input);
    const storageCredentialId = input.storageCredentialId ?? null;
    if (storageCredentialId !== null && model.modality === 'text') {
      throw new AppError('invalid_request', 'storageCredentialId applies to image and video models only', { param: 'storageCredentialId' });
    }
    await this.storage.check(workspaceId, storageCredentialId);
    const provider = input.provider ?? 'local';
    const shareIdleCapacity = input.shareIdleCapacity ?? false;
    if (shareIdleCapacity) assertShareable(model, provider);
    const joinToken = provider === 'external' ? newSecret('jt-') : null;
    const budget = this.budget;
    const deployment = await this.store.insert(this.store.repository.create({
      id: newId('dep'), workspaceId, modelId: model.id, slug: slugFor(model.id), status: 'Creating',
      statusReason: provider === 'external' ? 'waiting for an agent to join with the deployment token' : 'placing replicas',
      priceCapPerHour: input.priceCapPerHour, minReplicas: input.minReplicas, maxReplicas: input.maxReplicas, desiredReplicas: input.minReplicas,
      autoscale: input.autoscale, provider, joinTokenHash: joinToken ? hashSecret(joinToken) : null, storageCredentialId,
      // Its replicas start with priority scheduling; `shared` once they run (SharingRollout).
      shareIdleCapacity, sharing: shareIdleCapacity ? 'activating' : 'not_shared',
      routingPolicy: routingPolicyOf(input.routingPolicy), ...lora, ...scaling,
    }), budget ? async (manager) => {
      await budget.checkProvider(manager, workspaceId, provider);
      await budget.holdDeployment(manager, workspaceId);
    } : undefined);
    await this.replicas.ensure(deployment);
    return { deployment, joinToken };
  }

  async list(workspaceId: string): Promise<Deployment[]> {
    const all = await this.store.repository.find({ where: { workspaceId }, order: { createdAt: 'ASC' } });
    return all.filter((deployment) => deployment.status !== 'Deleted');
  }

  async get(workspaceId: string, id: string): Promise<Deployment> {
    const deployment = await this.store.find(id);
    if (!deployment || deployment.status === 'Deleted') {
      throw new AppError('not_found', `no deployment '${shortened(id)}'`, { param: 'id' });
    }
    if (deployment.workspaceId !== workspaceId) {
      throw new AppError('permission_denied', `deployment '${shortened(id)}' belongs to another workspace`, { param: 'id' });
    }
    return deployment;
  }

  /**
   * Changes price cap, replica range, autoscale or default storage. In-flight requests are not
   * touched: the replica count moves to the new range through placement (new replicas) and
   * scale-down (surplus ones drain first); replicas already placed keep their offer.
   */
  async update(workspaceId: string, id: string, changes: DeploymentChanges): Promise<Deployment> {
    const deployment = await this.get(workspaceId, id);
    if (!EDITABLE.includes(deployment.status)) {
      throw new AppError('invalid_state_transition', `a ${deployment.status} deployment cannot be edited`);
    }
    const next = {
      modelId: deployment.modelId, autoscale: changes.autoscale ?? deployment.autoscale,
      priceCapPerHour: changes.priceCapPerHour ?? deployment.priceCapPerHour,
      minReplicas: changes.minReplicas ?? deployment.minReplicas, maxReplicas: changes.maxReplicas ?? deployment.maxReplicas,
    };
    validateSettings(next);
    const { modelId: _unchanged, ...settings } = next;
    const written: QueryDeepPartialEntity<Deployment> = settings;
    if (changes.storageCredentialId !== undefined) {
      const model = this.catalog.get(deployment.modelId);
      if (changes.storageCredentialId !== null && model.modality === 'text') {
        throw new AppError('invalid_request', 'storageCredentialId applies to image and video models only', { param: 'storageCredentialId' });
      }
      await this.storage.check(workspaceId, changes.storageCredentialId);
      written.storageCredentialId = changes.storageCredentialId;
    }
    if (changes.routingPolicy !== undefined && changes.routingPolicy !== null) written.routingPolicy = routingPolicyOf(changes.routingPolicy);
    if (changes.maxLoras != null || changes.maxCpuLoras != null || changes.maxLoraRank != null) {
      const lora = loraSettingsOf(changes, deployment as LoraSettings);
      await this.checkAttachedAdapters(deployment, lora);
      Object.assign(written, lora);
    }
    if (changes.scalingPolicy !== undefined || changes.slo !== undefined || changes.scaleToZeroAfterSeconds !== undefined || changes.coldStartQueueLimit !== undefined) {
      Object.assign(written, scalingSettingsOf(this.catalog.get(deployment.modelId), changes, deployment));
    }
    if (changes.shareIdleCapacity === true) {
      assertShareable(this.catalog.get(deployment.modelId), deployment.provider);
      // Already shared or activating stays as it is; otherwise the rolling restart begins.
      written.shareIdleCapacity = true;
      written.sharing = () => `CASE WHEN share_idle_capacity THEN sharing ELSE 'activating' END`;
    } else if (changes.shareIdleCapacity === false) {
      // Guests stop being admitted at once; guest requests already running finish.
      written.shareIdleCapacity = false;
      written.sharing = 'not_shared';
    }
    // Autoscale off pins the count at min; on, the autoscaler goes on from the current count
    // (read in the UPDATE itself: it may have moved since this request read the row).
    // A deployment scaled to zero stays there: an edit is not a request, and must not start a replica.
    written.desiredReplicas = next.autoscale
      ? () => `CASE WHEN desired_replicas = 0 AND scale_to_zero_after_seconds IS NOT NULL THEN 0 ELSE LEAST(${next.maxReplicas}, GREATEST(${next.minReplicas}, desired_replicas)) END`
      : () => `CASE WHEN desired_replicas = 0 AND scale_to_zero_after_seconds IS NOT NULL THEN 0 ELSE ${next.minReplicas} END`;
    const saved = await this.store.update(deployment.id, written, EDITABLE);
    if (saved.status === 'Deleted') throw new AppError('invalid_state_transition', 'a Deleted deployment cannot be edited');
    if (saved.status !== 'Paused') await this.replicas.ensure(saved);
    return saved;
  }

  /**
   * Settings that would fail every load of an attached adapter are refused, naming the field and
   * the adapter (docs/adapters.md#attaching): `maxLoras` 0 while any is attached, `maxLoraRank`
   * lowered below an attached adapter's rank. Only a change can do it: attaching checks both.
   */
  private async checkAttachedAdapters(deployment: Deployment, lora: LoraSettings): Promise<void> {
    const noSlots = lora.maxLoras === 0 && deployment.maxLoras !== 0;
    const lowerRank = lora.maxLoraRank < deployment.maxLoraRank;
    if (!this.adapterNeeds || (!noSlots && !lowerRank)) return;
    const needs = await this.adapterNeeds.of(deployment.id);
    if (needs.length === 0) return;
    const more = needs.length > 1 ? ` and ${needs.length - 1} more` : '';
    if (noSlots) {
      throw new AppError('invalid_request', `maxLoras cannot be 0 while adapter ${quoteValue(needs[0].name)}${more} is attached to this deployment; detach it first`, { param: 'maxLoras' });
    }
    // Largest rank first: the first is the one that does not fit, if any does not.
    const [largest] = needs;
    if (largest.rank > lora.maxLoraRank) {
      throw new AppError('invalid_request',
        `maxLoraRank ${lora.maxLoraRank} is below the rank ${largest.rank} of attached adapter ${quoteValue(largest.name)}; detach it first or keep maxLoraRank at least ${largest.rank}`,
        { param: 'maxLoraRank' });
    }
  }

  /**
   * The autoscaler's choice, within the row's current [min, max]; only while serving. Placement
   * follows. 0 is kept only for a deployment that scales to zero (read in the UPDATE itself: the
   * owner may have just turned it off); for any other it is clamped to min.
   */
  async setDesiredReplicas(deployment: Deployment, desired: number): Promise<Deployment> {
    const toZero = desired === 0 && scalesToZero(deployment);
    const clamped = toZero ? 0 : Math.min(deployment.maxReplicas, Math.max(deployment.minReplicas, desired));
    if (clamped === deployment.desiredReplicas) return deployment;
    const within = `LEAST(max_replicas, GREATEST(min_replicas, ${Math.floor(desired)}))`;
    return await this.store.update(deployment.id, {
      desiredReplicas: () => (toZero ? `CASE WHEN scale_to_zero_after_seconds IS NOT NULL THEN 0 ELSE ${within} END` : within),
    }, ['Creating', 'Running']);
  }

  /** Endpoint answers 503 "paused"; replicas are released, so billing stops. */
  async pause(workspaceId: string, id: string): Promise<Deployment> {
    return await this.stopServing(workspaceId, id, 'Paused', 'paused');
  }

  async resume(workspaceId: string, id: string): Promise<Deployment> {
    const resumed = await this.transitionForUser(workspaceId, id, 'Creating', 'placing replicas', (current) => {
      if (current.status !== 'Paused') throw new AppError('invalid_state_transition', `only a Paused deployment can be resumed; this one is ${current.status}`);
    });
    await this.replicas.ensure(resumed);
    return resumed;
  }

  /** Endpoint answers 404; its batches are cancelled and its files deleted; replicas are released. */
  async delete(workspaceId: string, id: string): Promise<Deployment> {
    return await this.stopServing(workspaceId, id, 'Deleted', 'deleted', () => this.batches.deploymentDeleted(workspaceId, id));
  }

  private async stopServing(workspaceId: string, id: string, to: 'Paused' | 'Deleted', verb: string, before?: () => Promise<void>): Promise<Deployment> {
    const deployment = await this.transitionForUser(workspaceId, id, to, `${verb} by user`, (current) => assertTransition(current.status, to));
    try {
      await before?.();
    } finally {
      // Whatever happened to its batches (the batch sweep finishes a deletion that stopped half-way), the replicas go.
      await this.replicas.release(deployment, `deployment ${verb}`);
    }
    return deployment;
  }

  /**
   * A user's status change wins over the platform's own: when the platform moved the row
   * between our read and our write (an agent ready, a restart), read it again and retry.
   */
  private async transitionForUser(
    workspaceId: string, id: string, to: DeploymentStatus, reason: string, allowed: (current: Deployment) => void,
  ): Promise<Deployment> {
    for (let attempt = 1; ; attempt++) {
      const current = await this.get(workspaceId, id);
      allowed(current);
      const next = await this.store.transition(current, to, reason);
      if (next.status === to) return next;
      if (attempt === 3) throw new AppError('invalid_state_transition', `the deployment kept changing (now ${next.status}); try again`);
    }
  }
}

function validateSettings(input: Pick<CreateDeploymentInput, 'priceCapPerHour' | 'minReplicas' | 'maxReplicas' | 'provider'>): void {
  const { priceCapPerHour, minReplicas, maxReplicas } = input;
  if (!Number.isFinite(priceCapPerHour) || priceCapPerHour <= 0 || priceCapPerHour > MAX_PRICE_CAP_PER_HOUR) {
    throw new AppError('invalid_request', `priceCapPerHour must be a price per replica-hour above 0 and at most ${MAX_PRICE_CAP_PER_HOUR}, got ${priceCapPerHour}`, { param: 'priceCapPerHour' });
  }
  if (!Number.isInteger(minReplicas) || minReplicas < 1 || minReplicas > MAX_REPLICAS) {
    throw new AppError('invalid_request', `minReplicas must be an integer from 1 to ${MAX_REPLICAS}, got ${minReplicas}`, { param: 'minReplicas' });
  }
  if (!Number.isInteger(maxReplicas) || maxReplicas < minReplicas || maxReplicas > MAX_REPLICAS) {
    throw new AppError('invalid_request', `maxReplicas must be an integer from minReplicas (${minReplicas}) to ${MAX_REPLICAS}, got ${maxReplicas}`, { param: 'maxReplicas' });
  }
  if (input.provider !== undefined && !PROVIDER_KINDS.includes(input.provider)) {
    throw new AppError('invalid_request', `provider must be one of ${PROVIDER_KINDS.map((kind) => `'${kind}'`).join(', ')}, got '${input.provider}'`, { param: 'provider' });
  }
}

/** `llama-3-1-8b-instruct-3fa9c2`: readable in a URL, unique by its random suffix. */
export function slugFor(modelId: string): string {
  const name = (modelId.split('/').pop() ?? modelId).toLowerCase().replace(/[^a-z0-9]+/g, '-').replace(/^-+|-+$/g, '').slice(0, 40);
  return `${name || 'model'}-${randomBytes(3).toString('hex')}`;
}

/** A routing policy setting, checked: absent is the default; anything else names the choices. */
function routingPolicyOf(value: string | null | undefined): RoutingPolicyName {
  if (value === undefined || value === null) return DEFAULT_ROUTING_POLICY;
  if ((ROUTING_POLICIES as readonly string[]).includes(value)) return value as RoutingPolicyName;
  throw new AppError('invalid_request', `routingPolicy must be one of ${ROUTING_POLICIES.map((name) => `'${name}'`).join(', ')}, got ${quoteValue(value)}`, { param: 'routingPolicy' });
}
