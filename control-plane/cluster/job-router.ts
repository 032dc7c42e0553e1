import type { AgentConnection } from '../dispatch/agent-connection';
import type { Dispatcher } from '../dispatch/dispatcher';
import type { DispatchRequest, Job, JobListener } from '../dispatch/job';
import { AppError } from '../errors/app-error';
import { promptKey, type PromptKey } from '../placement/prompt-key';
import { RecentPrefixes } from '../placement/recent-prefixes';
import {
  choosePrefixAware, DEFAULT_PREFIX_ROUTING, type PrefixRoutingOptions, type RouteCandidate, type RoutingPolicyName, type RoutingReason,
} from '../placement/routing-policy';
import { placeJob, type PeerOffer } from './placement';
import type { RelayClient } from './relay-client';
import type { Peer, ServerRegistry } from './server-registry';

/** How a request asks to be routed: its deployment's policy, and the parsed body its prompt key is read from (only when it matters). */
export interface RouteHint {
  readonly policy: RoutingPolicyName;
  readonly fields: Record<string, unknown>;
  /** The workspace the job is for: its prompt key is its own (prompt-key.ts), as its prefix cache is. */
  readonly tenant: string;
}

/** Told of every routing decision (the `routing_decisions_total` metric). */
export type RouteObserver = (deploymentId: string, policy: RoutingPolicyName, reason: RoutingReason) => void;

type Candidate = RouteCandidate & ({ readonly connection: AgentConnection } | { readonly peer: Peer });

/**
 * Where an owner's text job runs, across every server. `least-loaded` is placement.ts's policy
 * (a free local slot first, else the peer with the most free slots, else queued here); with a
 * `prefix-aware` or `round-robin` hint every ready replica of the deployment is a candidate,
 * here or on a peer (its load as of the peer's last heartbeat), and the routing policy
 * (routing/routing-policy.ts) chooses one. A peer's replica is reached by relaying the job
 * with the replica's id, which the peer honours while that replica takes work.
 */
export class JobRouter {
  private readonly recent = new RecentPrefixes();
  private readonly turns = new Map<string, number>();

  constructor(
    private readonly dispatcher: Dispatcher,
    private readonly registry: Pick<ServerRegistry, 'peers'>,
    private readonly relay: Pick<RelayClient, 'run'>,
    private readonly observe: RouteObserver = () => {},
    private readonly prefixRouting: PrefixRoutingOptions = DEFAULT_PREFIX_ROUTING,
  ) {}

  /** Sends the job now; throws `no_replica_available` when no server holds a ready replica of the deployment. */
  dispatch(request: DispatchRequest, listener: JobListener, hint?: RouteHint): Job {
    const { deploymentId } = request;
    let reason: RoutingReason | undefined;
    if (hint !== undefined && hint.policy !== 'least-loaded' && this.hasChoice(deploymentId)) {
      const key = hint.policy === 'prefix-aware' ? promptKey(hint.fields, hint.tenant) : null;
      // Nothing any replica can hold yet: where it goes only matters for load, and the
      // least-loaded placement knows this server's replicas' load now (a peer's only as of its
      // last heartbeat, which a hash over every replica would trust: measured 2.9 s TTFT p90
      // against 1.3 s on a trace of unrelated prompts, bench/results/2026-11-26-routing-014887a.md).
      if (hint.policy === 'round-robin' || key?.shared) return this.route(this.candidates(deploymentId), request, listener, hint.policy, key);
      reason = 'no_prefix';
    }
    const local = this.dispatcher.leastLoaded(deploymentId);
    // The common case (a free slot here) allocates nothing for placement: it is on every text request's path.
    const placed = local !== null && local.liveFreeSlots > 0 ? null : placeJob<AgentConnection>(local, local?.liveFreeSlots ?? 0, () => this.offers(deploymentId), true);
    if (local === null && placed === null) throw new AppError('no_replica_available', 'no replica of this deployment is ready; retry shortly', { retryAfterSeconds: 5 });
    if (hint !== undefined) this.observe(deploymentId, hint.policy, reason ?? (hint.policy === 'least-loaded' ? 'least_loaded' : 'only_replica'));
    if (placed === null || placed.kind === 'local') return this.dispatcher.dispatchTo(placed?.local ?? local!, request, listener);
    return this.relay.run(placed.offer.peer, request, listener);
  }

  /** More than one replica of the deployment takes work, here or on peers (counted without building the list). */
  private hasChoice(deploymentId: string): boolean {
    let count = 0;
    for (const connection of this.dispatcher.connections(deploymentId)) {
      if (!connection.draining && !connection.closed && ++count > 1) return true;
    }
    for (const peer of this.registry.peers()) {
      count += peer.load[deploymentId]?.replicas?.length ?? 0;
      if (count > 1) return true;
    }
    return false;
  }

  private route(candidates: Candidate[], request: DispatchRequest, listener: JobListener, policy: RoutingPolicyName, key: PromptKey | null): Job {
    let chosen: Candidate;
    let reason: RoutingReason;
    if (policy === 'round-robin' || !key) {
      candidates.sort((a, b) => (a.replicaId < b.replicaId ? -1 : 1));
      const turn = this.turns.get(request.deploymentId) ?? 0;
      this.turns.set(request.deploymentId, turn + 1);
      chosen = candidates[turn % candidates.length];
      reason = 'round_robin';
    } else {
      const decision = choosePrefixAware(candidates, key, this.prefixRouting);
      chosen = decision.chosen;
      const seen = this.recent.sent(chosen.replicaId, key.application);
      reason = !decision.ranked ? 'load_fallback' : seen ? 'prefix_hit' : 'prefix_cold';
    }
    this.observe(request.deploymentId, policy, reason);
    if ('connection' in chosen) return this.dispatcher.dispatchTo(chosen.connection, request, listener);
    return this.relay.run(chosen.peer, { ...request, replicaId: chosen.replicaId }, listener);
  }

  /** Every replica of the deployment taking work: this server's (load now) and peers' (as last reported). */
  private candidates(deploymentId: string): Candidate[] {
    const candidates: Candidate[] = [];
    for (const connection of this.dispatcher.connections(deploymentId)) {
      if (connection.draining || connection.closed) continue;
      candidates.push({ replicaId: connection.replicaId, load: connection.liveBusy + connection.reserved, capacity: connection.maxConcurrency, connection });
    }
    for (const peer of this.registry.peers()) {
      for (const replica of peer.load[deploymentId]?.replicas ?? []) {
        candidates.push({ replicaId: replica.id, load: replica.load, capacity: replica.capacity, peer });
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
