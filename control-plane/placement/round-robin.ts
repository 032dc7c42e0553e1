import { ONLY_REPLICA, type PlacementPolicy, type PolicyChoice, type PromptSource, type ReplicaSource, type RouteCandidate } from './placement-policy';

/**
 * `round-robin`: each deployment's jobs take its replicas (here and on peers) in turn, in
 * replica id order. The turn is this server's: servers do not share it.
 */
export class RoundRobinPolicy implements PlacementPolicy {
  readonly name = 'round-robin';
  private readonly turns = new Map<string, number>();

  choose<C extends RouteCandidate>(deploymentId: string, _prompt: PromptSource, replicas: ReplicaSource<C>): PolicyChoice<C> {
    if (!replicas.hasChoice(deploymentId)) return ONLY_REPLICA;
    const candidates = replicas.candidates(deploymentId).sort((a, b) => (a.replicaId < b.replicaId ? -1 : 1));
    const turn = this.turns.get(deploymentId) ?? 0;
    this.turns.set(deploymentId, turn + 1);
    return { chosen: candidates[turn % candidates.length], reason: 'round_robin' };
  }
}
