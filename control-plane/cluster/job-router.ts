import type { AgentConnection } from '../dispatch/agent-connection';
import type { Dispatcher } from '../dispatch/dispatcher';
import type { DispatchRequest, Job, JobListener } from '../dispatch/job';
import { AppError } from '../errors/app-error';
import { AdapterPlacement, DEFAULT_ADAPTER_ROUTING } from '../placement/adapter-aware';
import type { AdapterCandidate } from '../placement/adapter-residency';
import { takesWork } from '../placement/filters';
import { localOrPeer, type LocalOrPeer } from '../placement/local-or-peer';
import { ParkedJobs } from './parked-jobs';
import type { PlacementPolicy, PromptSource, ReplicaSource, RoutingPolicyName, RoutingReason } from '../placement/placement-policy';
import { placementPolicies } from '../placement/policies';
import { DEFAULT_PREFIX_ROUTING, type PrefixRoutingOptions } from '../placement/prefix-aware';
import type { RelayClient } from './relay-client';
import { connectionAdapters, peerReplicaAdapters } from './replica-adapters';
import type { Peer, PeerOffer, ServerRegistry } from './server-registry';

/** How a request asks to be routed: its deployment's policy, and the parsed body its prompt key is read from (only when it matters). */
export interface RouteHint extends PromptSource {
  readonly policy: RoutingPolicyName;
}

/** Told of every routing decision (the `routing_decisions_total` metric). */
export type RouteObserver = (deploymentId: string, policy: RoutingPolicyName, reason: RoutingReason) => void;

type Candidate = AdapterCandidate & ({ readonly connection: AgentConnection } | { readonly peer: Peer });

/**
 * Where an owner's text job runs, across every server. The deployment's routing policy
 * (placement/policies.ts) chooses among every ready replica of the deployment, here or on a peer
 * (its load as of the peer's last heartbeat), or leaves the job to load placement
 * (placement/local-or-peer.ts: the dispatcher's least-loaded replica when it has a free slot,
 * else the peer with the most free slots, else queued here). A peer's replica is reached by
 * relaying the job with the replica's id, which the peer honours while that replica takes work.
 */
export class JobRouter {
  private readonly policies: { readonly [name in RoutingPolicyName]: PlacementPolicy };
  private readonly adapters: AdapterPlacement;
  /** What the policies read of the deployment's replicas: this router's view, built once (a request allocates none). */
  private readonly replicas: ReplicaSource<Candidate> = {
    hasChoice: (deploymentId) => this.hasChoice(deploymentId),
    candidates: (deploymentId) => this.candidates(deploymentId),
  };

  /** Relayed jobs sent back with nowhere to go yet: tried again after the next read of the peers. */
  private readonly parked: ParkedJobs;

  constructor(
    private readonly dispatcher: Dispatcher,
    private readonly registry: Pick<ServerRegistry, 'peers' | 'onPeers'>,
    private readonly relay: Pick<RelayClient, 'run' | 'move'>,
    private readonly observe: RouteObserver = () => {},
    prefixRouting: PrefixRoutingOptions = DEFAULT_PREFIX_ROUTING,
    /** The longest a job sent back waits for the next read of the peers (about two registry heartbeats). */
    maxParkMs = 2_000,
  ) {
    this.policies = placementPolicies({ prefixRouting });
    this.adapters = new AdapterPlacement(this.policies, { ...DEFAULT_ADAPTER_ROUTING, prefixRouting });
    this.parked = new ParkedJobs(maxParkMs);
    registry.onPeers(() => this.parked.peersRead());
  }

  /** Sends the job now; throws `no_replica_available` when no server holds a ready replica of the deployment. */
  dispatch(request: DispatchRequest, listener: JobListener, hint?: RouteHint): Job {
    const { deploymentId } = request;
    if (request.adapter) return this.dispatchAdapter(request, listener, hint);
    const choice = hint === undefined ? null : this.policies[hint.policy].choose(deploymentId, hint, this.replicas);
    if (choice?.chosen) return this.send(choice.chosen, request, listener, hint!.policy, choice.reason);
    const local = this.dispatcher.leastLoaded(deploymentId);
    // The common case (a free slot here) allocates nothing for placement: it is on every text request's path.
    const placed = local !== null && local.liveFreeSlots > 0 ? null : localOrPeer<AgentConnection, PeerOffer>(local, local?.liveFreeSlots ?? 0, () => this.offers(deploymentId), true);
    if (local === null && placed === null) throw new AppError('no_replica_available', 'no replica of this deployment is ready; retry shortly', { retryAfterSeconds: 5 });
    if (choice) this.observe(deploymentId, hint!.policy, choice.reason);
    const job = placed === null || placed.kind === 'local' ? this.dispatcher.dispatchTo(placed?.local ?? local!, request, listener) : this.relay.run(placed.offer.peer, request, listener);
    if (choice) job.routingReason = choice.reason;
    return job;
  }

  /**
   * A job addressed to a LoRA adapter: only a replica with adapter slots may take it, here or
   * on a peer, chosen by residency under the deployment's policy (placement/adapter-aware.ts).
   * None ready at all: the 503 every job gets. Replicas ready but none with adapter slots (their
   * engines were started without LoRA, or by agents older than adapters): a 503 that says so,
   * since waiting for them does not help; a deployment's replicas restart with its LoRA settings.
   */
  private dispatchAdapter(request: DispatchRequest, listener: JobListener, hint: RouteHint | undefined): Job {
    const candidates = this.candidates(request.deploymentId);
    const policy = hint?.policy ?? 'prefix-aware';
    const choice = this.adapters.choose(policy, request.deploymentId, request.adapter!.name, hint ?? null, candidates);
    if (!choice?.chosen) {
      if (candidates.length === 0) throw new AppError('no_replica_available', 'no replica of this deployment is ready; retry shortly', { retryAfterSeconds: 5 });
      throw new AppError('no_replica_available', 'no ready replica of this deployment serves adapters: their engines report no adapter slots', { retryAfterSeconds: 30 });
    }
    return this.send(choice.chosen, request, listener, policy, choice.reason);
  }

  /**
   * A relayed job the peer sent back `agent_draining` before it produced anything: the peer's
   * replicas left since this server's view of them (a heartbeat old). It runs elsewhere, as the
   * dispatcher retries a local job refused by a draining replica: here when a replica takes work,
   * else on another peer that reports a ready one (localOrPeer's rule); at most 3 attempts, never
   * a guest's job, a batch line or an adapter's job (placed by residency). With nowhere to go now
   * it is tried once more after this server's next read of its peers (ParkedJobs: the replica may
   * have joined one not read yet). Else it fails as it came.
   */
  replace(job: Job, fromPeerId: string): void {
    const { request } = job;
    if (job.attempts >= 3 || request.guest || request.batch || request.adapter) return failSentBack(job);
    if (this.moveElsewhere(job, fromPeerId)) return;
    this.parked.park(job, () => this.moveElsewhere(job, fromPeerId) || failSentBack(job), () => failSentBack(job));
  }

  /** Sends the job where `elsewhere` places it; false when nowhere. */
  private moveElsewhere(job: Job, exceptPeerId: string): boolean {
    const placed = this.elsewhere(job.request.deploymentId, exceptPeerId);
    if (!placed) return false;
    job.attempts++;
    // The replica chosen on the other peer is not where the job goes now.
    job.request.replicaId = undefined;
    if (placed.kind === 'local') placed.local.assign(job);
    else this.relay.move(placed.offer.peer, job);
    return true;
  }

  private elsewhere(deploymentId: string, exceptPeerId: string): LocalOrPeer<AgentConnection, PeerOffer> | null {
    const local = this.dispatcher.leastLoaded(deploymentId);
    const offers = () => [...this.offers(deploymentId)].filter((offer) => offer.peer.id !== exceptPeerId);
    return localOrPeer<AgentConnection, PeerOffer>(local, local?.liveFreeSlots ?? 0, offers, true);
  }

  /** A replica of the deployment takes work here, or a peer reported a ready one: a job can be sent now. */
  hasReplica(deploymentId: string): boolean {
    if (this.dispatcher.connections(deploymentId).some(takesWork)) return true;
    return this.registry.peers().some((peer) => (peer.load[deploymentId]?.ready ?? 0) > 0);
  }

  /** More than one replica of the deployment takes work, here or on peers (counted without building the list). */
  private hasChoice(deploymentId: string): boolean {
    let count = 0;
    for (const connection of this.dispatcher.connections(deploymentId)) {
      if (takesWork(connection) && ++count > 1) return true;
    }
    for (const peer of this.registry.peers()) {
      count += peer.load[deploymentId]?.replicas?.length ?? 0;
      if (count > 1) return true;
    }
    return false;
  }

  /** The policy's choice: here, or relayed to the peer holding it with the replica's id. */
  private send(chosen: Candidate, request: DispatchRequest, listener: JobListener, policy: RoutingPolicyName, reason: RoutingReason): Job {
    this.observe(request.deploymentId, policy, reason);
    const job = 'connection' in chosen ? this.dispatcher.dispatchTo(chosen.connection, request, listener) : this.relay.run(chosen.peer, { ...request, replicaId: chosen.replicaId }, listener);
    job.routingReason = reason;
    return job;
  }

  /** Every replica of the deployment taking work: this server's (load now) and peers' (as last reported). */
  private candidates(deploymentId: string): Candidate[] {
    const candidates: Candidate[] = [];
    for (const connection of this.dispatcher.connections(deploymentId)) {
      if (!takesWork(connection)) continue;
      candidates.push({
        replicaId: connection.replicaId, load: connection.liveBusy + connection.reserved, capacity: connection.maxConcurrency,
        maxLoras: connection.maxLoras, adapters: connectionAdapters(connection), connection,
      });
    }
    for (const peer of this.registry.peers()) {
      for (const replica of peer.load[deploymentId]?.replicas ?? []) {
        candidates.push({ replicaId: replica.id, load: replica.load, capacity: replica.capacity, maxLoras: replica.maxLoras ?? 0, adapters: peerReplicaAdapters(replica), peer });
      }
    }
    return candidates;
  }

  /** Peers with a ready replica of the deployment, and their free slots. */
  private *offers(deploymentId: string): Iterable<PeerOffer> {
    for (const peer of this.registry.peers()) {
      const load = peer.load[deploymentId];
      if (load && load.ready > 0) yield { peer, deploymentId, slots: load.freeSlots };
    }
  }
}

/** A job sent back with nowhere to go: the 503 the client got before jobs were moved. */
function failSentBack(job: Job): void {
  job.finished = true;
  job.listener.onFailed({ code: 'agent_draining', message: 'no replica of this deployment is ready; retry shortly', engineStatus: 0, engineBody: null, usage: undefined });
}
