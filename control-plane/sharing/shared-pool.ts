import type { Logger } from 'pino';
import type { Catalog, CatalogModel } from '../catalog/catalog';
import type { Deployment } from '../deployments/deployment.entity';
import { STAND_IN_ENGINE_KIND } from '../replicas/deployment-engines';
import type { DeploymentStore } from '../deployments/deployment-store';
import type { Peer, PeerOffer } from '../cluster/server-registry';
import type { AgentConnection } from '../dispatch/agent-connection';
import type { Dispatcher } from '../dispatch/dispatcher';
import { servesAdapters } from '../placement/adapter-residency';
import { takesGuests } from '../placement/filters';
import { localOrPeer } from '../placement/local-or-peer';
import { pickBest } from '../placement/pick';
import { guestSlotsOn } from '../placement/slots';
import type { ControlPlaneEvents } from '../events/control-plane-events';
import { availabilityOf, GuestTraffic, type SharedAvailability } from './shared-availability';
import type { SharingConfig } from './sharing-config';
import type { SharedAdapter } from './shared-adapters';
import { sharedPrices, type SharedPrices } from '../deployments/sharing-eligibility';

declare module '../events/control-plane-events' {
  interface ControlPlaneEventMap {
    /** A shared model's availability changed (recomputed every SHARED_AVAILABILITY_INTERVAL_MS on each server). */
    sharedModelUpdated: [SharedModel];
  }
}

/** A shareable model and its per-token prices: all a guest request's admission needs. */
export interface PricedModel {
  /** The catalog model (an adapter's base model): its prices, its pool's measures and fair shares. */
  modelId: string;
  prices: SharedPrices;
  /** Set for an owner's LoRA adapter called as `shared/<adapter id>` (docs/adapters.md#sharing): placed only on its deployments. */
  adapter?: SharedAdapter;
}

/** One shareable model as a guest sees it (`GET /shared/v1/models`). */
export interface SharedModel extends PricedModel {
  availability: SharedAvailability;
  /** Guest slots free now over every provider's replicas. */
  idleGuestSlots: number;
  /** Some provider's replica runs the weights-free CPU stand-in engine: its answers are placeholder words. */
  standIn: boolean;
}

export type GuestPlacement =
  /** `idleSlots`: the model's idle guest slots over the pool (here and on peers), this one included. */
  | { kind: 'replica'; connection: AgentConnection; idleSlots: number }
  /** A replica on another server: the job is relayed there, and that server checks the slot again. */
  | { kind: 'peer'; peer: Peer; deploymentId: string; ownerWorkspaceId: string; idleSlots: number }
  | { kind: 'busy' }
  | { kind: 'unavailable' };

/**
 * The shared deployments of each model and their replicas' guest slots. A replica admits a
 * guest only into a slot its owner leaves idle, keeping `ownerHeadroomFraction` of its slots
 * (at least one) free for the owner's next requests, and at most `maxGuestsPerReplica` guests:
 * the engine's priority only reorders its waiting queue (docs/shared-serving.md), so owners are
 * protected here, before the engine. Past idle capacity a guest is refused at once, never queued.
 */
export class SharedPool {
  /** modelId → ids of its deployments whose sharing is `shared` and that are serving. */
  private readonly members = new Map<string, Set<string>>();
  /** deploymentId → its owner's workspace (credited for what guests pay). */
  private readonly owners = new Map<string, string>();
  private readonly traffic = new Map<string, GuestTraffic>();
  private readonly lastAvailability = new Map<string, SharedAvailability>();
  private readonly pricedModels = new WeakMap<CatalogModel, PricedModel | null>();
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly catalog: Catalog,
    private readonly deployments: DeploymentStore,
    private readonly dispatcher: Dispatcher,
    private readonly events: ControlPlaneEvents,
    private readonly config: SharingConfig,
    private readonly logger: Logger,
    /** Other servers and the guest slots their replicas report (at most a registry heartbeat old). */
    private readonly peers: () => readonly Peer[] = () => [],
  ) {
    events.on('deploymentUpdated', (deployment) => this.track(deployment));
  }

  /** Loads the members and recomputes availability every `availabilityIntervalMs`. */
  async start(): Promise<void> {
    await this.reload();
    this.timer = setInterval(() => void this.tick(), this.config.availabilityIntervalMs);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
  }

  /** The eligible catalog models, each with prices and its availability now. */
  models(): SharedModel[] {
    return this.catalog.enabledModels.filter((model) => sharedPrices(model)).map((model) => this.view(model));
  }

  /** A shareable model's prices by catalog id; null when it is not one. Cheap: every guest request (a refused one too) asks. */
  priced(modelId: string): PricedModel | null {
    const model = this.catalog.find(modelId);
    if (!model || !this.catalog.isEnabled(model.id)) return null;
    // One object per catalog model: a guest flood asks for it on every attempt, and what is
    // derived from it (unit prices, refusals, the label) is kept by its identity.
    let priced = this.pricedModels.get(model);
    if (priced === undefined) {
      const prices = sharedPrices(model);
      priced = prices ? { modelId: model.id, prices } : null;
      this.pricedModels.set(model, priced);
    }
    return priced;
  }

  /** One model with its availability now (measured over the last minute); null when it is not shareable. */
  model(modelId: string): SharedModel | null {
    return this.priced(modelId) ? this.view(this.catalog.get(modelId)) : null;
  }

  /**
   * The replica with the most guest slots among the model's shared deployments: filter (this
   * server's replicas that take guests; peers that report a guest-ready replica of a member) →
   * score (guest slots) → pick, then the one cross-server rule (placement/local-or-peer.ts):
   * one whose agent this server holds first (no hop), else the peer reporting the most for one
   * deployment; a guest never queues. A guest's job addressed to an owner's LoRA adapter
   * (`needsAdapterSlots`) takes only replicas with adapter slots: here by their Hello, on a peer
   * when its row lists such a replica of the deployment (the peer checks again, placeHere), and
   * only the members among `only` (the deployments the adapter is attached to) when given.
   */
  place(modelId: string, needsAdapterSlots = false, only?: ReadonlySet<string>): GuestPlacement {
    const members = this.membersOf(modelId, only);
    const local: AgentConnection[] = [];
    for (const deploymentId of members) {
      for (const connection of this.dispatcher.connections(deploymentId)) {
        if (takesGuests(connection) && (!needsAdapterSlots || servesAdapters(connection))) local.push(connection);
      }
    }
    let idleSlots = 0;
    for (const connection of local) idleSlots += this.guestSlots(connection);
    const best = pickBest(local, this.slotsOf);
    const offers: PeerOffer[] = [];
    for (const peer of this.peers()) {
      for (const deploymentId of members) {
        const load = peer.load[deploymentId];
        if (load?.guestReady && (!needsAdapterSlots || load.replicas?.some((replica) => (replica.maxLoras ?? 0) > 0))) {
          offers.push({ peer, deploymentId, slots: load.guestSlots });
          idleSlots += Math.max(0, load.guestSlots);
        }
      }
    }
    const placed = localOrPeer(best, best === null ? 0 : this.guestSlots(best), () => offers, false);
    if (placed?.kind === 'local') return { kind: 'replica', connection: placed.local, idleSlots };
    if (placed) {
      const { peer, deploymentId } = placed.offer;
      return { kind: 'peer', peer, deploymentId, ownerWorkspaceId: this.owners.get(deploymentId) ?? '', idleSlots };
    }
    return local.length + offers.length === 0 ? { kind: 'unavailable' } : { kind: 'busy' };
  }

  /** The model's shared deployments, those among `only` when given. */
  private membersOf(modelId: string, only?: ReadonlySet<string>): ReadonlySet<string> {
    const members = this.members.get(modelId);
    if (!members) return new Set<string>();
    if (!only) return members;
    return new Set([...members].filter((id) => only.has(id)));
  }

  /**
   * A shared adapter as a guest sees it: its base model's prices, and its availability over the
   * owner's deployments it is attached to that share (replicas with adapter slots), with the
   * base model's guest traffic measures (its requests are that pool's).
   */
  adapterModel(priced: PricedModel & { adapter: SharedAdapter }): SharedModel {
    return { ...this.view(this.catalog.get(priced.modelId), priced.adapter.deploymentIds), adapter: priced.adapter };
  }

  /** A relayed guest's slot on this server: the replica of `deploymentId` with the most guest slots (with adapter slots, for an adapter's job), or null. */
  placeHere(deploymentId: string, needsAdapterSlots = false): AgentConnection | null {
    const connections = this.dispatcher.connections(deploymentId);
    return pickBest(needsAdapterSlots ? connections.filter(servesAdapters) : connections, this.slotsOf);
  }

  /** Idle slots a guest may take on this replica now (placement/slots.ts: beyond the owner's headroom, up to the guest bound). */
  guestSlots(connection: AgentConnection): number {
    return guestSlotsOn(connection, this.config);
  }

  /** The pick's score, bound once (a guest flood asks on every attempt). */
  private readonly slotsOf = (connection: AgentConnection): number => this.guestSlots(connection);

  trafficOf(modelId: string): GuestTraffic {
    let traffic = this.traffic.get(modelId);
    if (!traffic) {
      traffic = new GuestTraffic();
      this.traffic.set(modelId, traffic);
    }
    return traffic;
  }

  /** Follows sharing and status changes made on this server or another (the store relays both). */
  private track(deployment: Deployment): void {
    const set = this.members.get(deployment.modelId) ?? new Set<string>();
    const serving = deployment.status === 'Creating' || deployment.status === 'Running';
    if (deployment.sharing === 'shared' && serving) set.add(deployment.id);
    else set.delete(deployment.id);
    this.owners.set(deployment.id, deployment.workspaceId);
    this.members.set(deployment.modelId, set);
  }

  private async reload(): Promise<void> {
    const shared = await this.deployments.listShared();
    const next = new Map<string, Set<string>>();
    for (const deployment of shared) {
      if (deployment.status !== 'Creating' && deployment.status !== 'Running') continue;
      const set = next.get(deployment.modelId) ?? new Set<string>();
      set.add(deployment.id);
      next.set(deployment.modelId, set);
      this.owners.set(deployment.id, deployment.workspaceId);
    }
    this.members.clear();
    for (const [modelId, set] of next) this.members.set(modelId, set);
  }

  /** Re-reads the members (a missed notification heals within a tick) and announces availability changes. */
  private async tick(): Promise<void> {
    try {
      await this.reload();
    } catch (error) {
      this.logger.warn({ err: error }, 'could not reload the shared pool; keeping the last members');
    }
    for (const model of this.models()) {
      const before = this.lastAvailability.get(model.modelId);
      this.lastAvailability.set(model.modelId, model.availability);
      if (before !== undefined && before !== model.availability) this.events.emit('sharedModelUpdated', model);
    }
  }

  /** `only`: an adapter's deployments, whose replicas count only with adapter slots. */
  private view(model: CatalogModel, only?: ReadonlySet<string>): SharedModel {
    let providers = 0;
    let idleGuestSlots = 0;
    let standIn = false;
    const members = this.membersOf(model.id, only);
    for (const deploymentId of members) {
      const connections = this.dispatcher.connections(deploymentId)
        .filter((connection) => connection.priorityScheduling && !connection.draining && (!only || servesAdapters(connection)));
      if (connections.length > 0) providers++;
      for (const connection of connections) {
        idleGuestSlots += this.guestSlots(connection);
        standIn ||= connection.engineKind === STAND_IN_ENGINE_KIND;
      }
    }
    for (const peer of this.peers()) {
      for (const deploymentId of members) {
        const load = peer.load[deploymentId];
        if (only && !load?.replicas?.some((replica) => (replica.maxLoras ?? 0) > 0)) continue;
        if (load?.guestReady) providers++;
        idleGuestSlots += load?.guestSlots ?? 0;
      }
    }
    const availability = availabilityOf({ providers, idleGuestSlots, ...this.trafficOf(model.id).measures() });
    return { modelId: model.id, prices: sharedPrices(model)!, availability, idleGuestSlots, standIn };
  }
}
