/**
 * The routing policies as the job router sees them (control-plane/placement/policies.ts): one
 * table by the `routingPolicy` names, each policy's choice (or its leaving the job to load
 * placement) and its reason. The replicas are a fixed list; every case is deterministic.
 */
import { placementPolicies } from '../../../control-plane/placement/policies';
import { ROUTING_POLICIES, type ReplicaSource, type RouteCandidate } from '../../../control-plane/placement/placement-policy';
import { DEFAULT_PREFIX_ROUTING, rankedOrder } from '../../../control-plane/placement/prefix-aware';
import { promptKey } from '../../../control-plane/placement/prompt-key';

function source(candidates: RouteCandidate[]): ReplicaSource<RouteCandidate> & { built: number } {
  const view = {
    built: 0,
    hasChoice: () => candidates.length > 1,
    candidates: () => {
      view.built++;
      return candidates.map((candidate) => ({ ...candidate }));
    },
  };
  return view;
}

const three = (): RouteCandidate[] => ['rep_c', 'rep_a', 'rep_b'].map((replicaId) => ({ replicaId, load: 0, capacity: 4 }));
const withInstructions = { fields: { messages: [{ role: 'system', content: 'Answer in French.' }, { role: 'user', content: 'hello' }] }, tenant: 'ws_1' };
const bare = { fields: { messages: [{ role: 'user', content: 'hello' }] }, tenant: 'ws_1' };

describe('the policy table', () => {
  it('holds one policy per routingPolicy name, under its own name', () => {
    const policies = placementPolicies();
    for (const name of ROUTING_POLICIES) expect(policies[name].name).toBe(name);
    expect(Object.keys(policies).sort()).toEqual([...ROUTING_POLICIES].sort());
  });

  it('builds fresh policies each time (their state is their router\'s)', () => {
    expect(placementPolicies()['round-robin']).not.toBe(placementPolicies()['round-robin']);
  });
});

describe('least-loaded', () => {
  it('leaves every job to load placement without building the list', () => {
    const replicas = source(three());
    expect(placementPolicies()['least-loaded'].choose('dep', withInstructions, replicas)).toEqual({ chosen: null, reason: 'least_loaded' });
    expect(replicas.built).toBe(0);
  });
});

describe('round-robin', () => {
  it('takes the replicas in turn, in id order, per deployment', () => {
    const policy = placementPolicies()['round-robin'];
    const replicas = source(three());
    const turns = Array.from({ length: 4 }, () => policy.choose('dep', bare, replicas));
    expect(turns.map((choice) => choice.chosen?.replicaId)).toEqual(['rep_a', 'rep_b', 'rep_c', 'rep_a']);
    expect(turns.every((choice) => choice.reason === 'round_robin')).toBe(true);
    expect(policy.choose('other', bare, replicas).chosen?.replicaId).toBe('rep_a');
  });

  it('with one replica, no choice to make', () => {
    expect(placementPolicies()['round-robin'].choose('dep', bare, source(three().slice(0, 1)))).toEqual({ chosen: null, reason: 'only_replica' });
  });
});

describe('prefix-aware', () => {
  const key = promptKey(withInstructions.fields, withInstructions.tenant)!;

  it('sends a shared prompt to the replica its key ranks first: cold the first time, a hit after', () => {
    const policy = placementPolicies()['prefix-aware'];
    const first = rankedOrder(three(), key, DEFAULT_PREFIX_ROUTING.homeReplicas)[0].replicaId;
    const replicas = source(three());
    expect(policy.choose('dep', withInstructions, replicas)).toEqual({ chosen: expect.objectContaining({ replicaId: first }), reason: 'prefix_cold' });
    expect(policy.choose('dep', withInstructions, replicas)).toEqual({ chosen: expect.objectContaining({ replicaId: first }), reason: 'prefix_hit' });
  });

  it('past the load bound, the next ranked replica (load_fallback)', () => {
    const candidates = three();
    const [first, second] = rankedOrder(candidates, key, DEFAULT_PREFIX_ROUTING.homeReplicas);
    first.load = 20;
    const choice = placementPolicies()['prefix-aware'].choose('dep', withInstructions, source(candidates));
    expect(choice).toEqual({ chosen: expect.objectContaining({ replicaId: second.replicaId }), reason: 'load_fallback' });
  });

  it('leaves a prompt nothing can hold yet to load placement (no_prefix), without building the list', () => {
    const replicas = source(three());
    expect(placementPolicies()['prefix-aware'].choose('dep', bare, replicas)).toEqual({ chosen: null, reason: 'no_prefix' });
    expect(placementPolicies()['prefix-aware'].choose('dep', { fields: {}, tenant: 'ws_1' }, replicas)).toEqual({ chosen: null, reason: 'no_prefix' });
    expect(replicas.built).toBe(0);
  });

  it('with one replica, no choice to make', () => {
    expect(placementPolicies()['prefix-aware'].choose('dep', withInstructions, source(three().slice(0, 1)))).toEqual({ chosen: null, reason: 'only_replica' });
  });
});
