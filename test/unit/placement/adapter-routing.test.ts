/**
 * Residency-aware placement of adapter jobs (control-plane/placement/adapter-aware.ts,
 * adapter-residency.ts, adapter-home.ts): the filter (adapter slots), the lora-load-state
 * scores, the load bound shared with prefix-aware routing, prefix affinity as the tie-break,
 * and the adapter's rendezvous home on a miss (the same on every server, moving little when a
 * replica leaves). Everything here is deterministic (fixed names, no randomness).
 */
import { AdapterPlacement, chooseForAdapter } from '../../../control-plane/placement/adapter-aware';
import { adapterHome, homeOrder } from '../../../control-plane/placement/adapter-home';
import { adapterFit, ADAPTER_FIT_SCORE, holdingsOf, NO_ADAPTERS, type AdapterCandidate, type AdapterHoldings } from '../../../control-plane/placement/adapter-residency';
import { placementPolicies } from '../../../control-plane/placement/policies';
import { DEFAULT_PREFIX_ROUTING, rankedOrder } from '../../../control-plane/placement/prefix-aware';
import { promptKey } from '../../../control-plane/placement/prompt-key';

interface Replica extends AdapterCandidate {
  replicaId: string;
  load: number;
  capacity: number;
  maxLoras: number;
  adapters: AdapterHoldings;
}

function fleet(count: number, maxLoras = 4): Replica[] {
  return Array.from({ length: count }, (_, index) => ({ replicaId: `rep_${index}`, load: 0, capacity: 4, maxLoras, adapters: NO_ADAPTERS }));
}

const holding = (gpu: string[], extra: Partial<AdapterHoldings> = {}): AdapterHoldings => ({ gpu, cpu: [], loading: [], ...extra });
const ADAPTERS = Array.from({ length: 200 }, (_, index) => `ad_${index.toString(36).padStart(6, '0')}.r1`);
const choose = (replicas: Replica[], adapter: string, pending?: (id: string) => boolean) =>
  chooseForAdapter(replicas, adapter, DEFAULT_PREFIX_ROUTING, null, pending);

describe('adapter residency: the scorer', () => {
  it('scores held ready 1.0, loading 0.8, host memory 0.7, a free slot 0.6, an evictable slot 0.3', () => {
    const replica = { ...fleet(1, 3)[0], adapters: holding(['a'], { loading: ['b'], cpu: ['c'] }) };
    expect(['a', 'b', 'c', 'd'].map((name) => adapterFit(replica, name))).toEqual(['gpu', 'loading', 'cpu', 'free_slot']);
    expect(adapterFit({ ...replica, maxLoras: 2 }, 'd')).toBe('evict');
    expect(ADAPTER_FIT_SCORE).toEqual({ gpu: 1, loading: 0.8, cpu: 0.7, free_slot: 0.6, evict: 0.3 });
  });

  it('reads a heartbeat compactly: by state, without FAILED, cut to the replica\'s slots', () => {
    const reported = [
      { name: 'g1', state: 'ADAPTER_STATE_GPU' }, { name: 'l1', state: 'ADAPTER_STATE_LOADING' }, { name: 'f1', state: 'ADAPTER_STATE_FAILED' },
      { name: 'g2', state: 'ADAPTER_STATE_GPU' }, { name: 'c1', state: 'ADAPTER_STATE_CPU' }, { name: 'c2', state: 'ADAPTER_STATE_CPU' },
      { name: 'x'.repeat(200), state: 'ADAPTER_STATE_GPU' },
    ];
    expect(holdingsOf(reported, 2, 1)).toEqual({ gpu: ['g1'], loading: ['l1'], cpu: ['c1'] });
    expect(holdingsOf(reported, 8, 8)).toEqual({ gpu: ['g1', 'g2'], loading: ['l1'], cpu: ['c1', 'c2'] });
    expect(holdingsOf(reported, 0, 8)).toBe(NO_ADAPTERS);
  });
});

describe('adapter residency: rendezvous home', () => {
  it('gives every adapter the same home whatever order a server lists the replicas in', () => {
    const replicas = fleet(8);
    const reversed = [...replicas].reverse();
    for (const adapter of ADAPTERS) {
      expect(adapterHome(reversed, adapter)!.replicaId).toBe(adapterHome(replicas, adapter)!.replicaId);
      expect(homeOrder(reversed, adapter).map((r) => r.replicaId)).toEqual(homeOrder(replicas, adapter).map((r) => r.replicaId));
      expect(homeOrder(replicas, adapter)[0].replicaId).toBe(adapterHome(replicas, adapter)!.replicaId);
    }
  });

  it('spreads homes over the replicas', () => {
    const counts = new Map<string, number>();
    for (const adapter of ADAPTERS) counts.set(adapterHome(fleet(8), adapter)!.replicaId, (counts.get(adapterHome(fleet(8), adapter)!.replicaId) ?? 0) + 1);
    expect(counts.size).toBe(8);
    // 25 each on average; a fair hash keeps every replica within 10..40 of 200.
    for (const count of counts.values()) expect(count).toBeGreaterThanOrEqual(10);
    for (const count of counts.values()) expect(count).toBeLessThanOrEqual(40);
  });

  it('moves only the adapters whose home left when a replica leaves, and a joining one takes only what it now ranks first', () => {
    const eight = fleet(8);
    const seven = eight.filter((replica) => replica.replicaId !== 'rep_3');
    let moved = 0;
    for (const adapter of ADAPTERS) {
      const before = adapterHome(eight, adapter)!.replicaId;
      const after = adapterHome(seven, adapter)!.replicaId;
      if (before !== 'rep_3') expect(after).toBe(before);
      else moved++;
    }
    expect(moved).toBeGreaterThan(0);
    const nine = [...eight, { ...eight[0], replicaId: 'rep_8' }];
    for (const adapter of ADAPTERS) {
      const after = adapterHome(nine, adapter)!.replicaId;
      if (after !== 'rep_8') expect(after).toBe(adapterHome(eight, adapter)!.replicaId);
    }
  });
});

describe('adapter residency: the choice', () => {
  const adapter = ADAPTERS[0];

  it('filters out replicas without adapter slots, and answers null when none has any', () => {
    const replicas = fleet(3);
    replicas[0].maxLoras = 0;
    replicas[1].maxLoras = 0;
    expect(choose(replicas, adapter)).toEqual({ chosen: replicas[2], reason: 'adapter_home' });
    replicas[2].maxLoras = 0;
    expect(choose(replicas, adapter)).toBeNull();
  });

  it('sends a miss to its home, then prefers the replica holding it over every free slot', () => {
    const replicas = fleet(4);
    const home = adapterHome(replicas, adapter)!;
    expect(choose(replicas, adapter)).toEqual({ chosen: home, reason: 'adapter_home' });
    const other = homeOrder(replicas, adapter)[3];
    other.adapters = holding([adapter]);
    expect(choose(replicas, adapter)).toEqual({ chosen: other, reason: 'adapter_resident' });
  });

  it('ranks ready over loading over host memory', () => {
    const replicas = fleet(3);
    const [first, second, third] = homeOrder(replicas, adapter);
    third.adapters = holding([], { cpu: [adapter] });
    expect(choose(replicas, adapter)).toEqual({ chosen: third, reason: 'adapter_cpu' });
    second.adapters = holding([], { loading: [adapter] });
    expect(choose(replicas, adapter)).toEqual({ chosen: second, reason: 'adapter_loading' });
    third.adapters = holding([adapter]);
    expect(choose(replicas, adapter)).toEqual({ chosen: third, reason: 'adapter_resident' });
    expect(first.adapters).toBe(NO_ADAPTERS);
  });

  it('sends it to a holder over the bound while that holder has a free request slot: a load would cost more than the imbalance', () => {
    const replicas = fleet(4);
    const [home, , , last] = homeOrder(replicas, adapter);
    last.adapters = holding([adapter]);
    // total 7 + 1 over 4 replicas: bound max(2, ceil(1.25 × 8 / 4)) = 3; last runs 3 of its 4
    last.load = 3;
    home.load = 2;
    replicas.filter((replica) => replica !== last && replica !== home).forEach((replica) => (replica.load = 1));
    expect(choose(replicas, adapter)).toEqual({ chosen: last, reason: 'adapter_resident' });
  });

  it('spills from a full holder to the first replica of its rendezvous order under the bound (adapter_load_fallback)', () => {
    const replicas = fleet(4);
    const [home, second, , last] = homeOrder(replicas, adapter);
    last.adapters = holding([adapter]);
    // total 8 + 1 over 4: bound 3; last is full (4 of 4)
    last.load = 4;
    home.load = 2;
    replicas.filter((replica) => replica !== last && replica !== home).forEach((replica) => (replica.load = 1));
    expect(choose(replicas, adapter)).toEqual({ chosen: home, reason: 'adapter_load_fallback' });
    // total 10 + 1: bound 4; the home full too
    home.load = 4;
    expect(choose(replicas, adapter)).toEqual({ chosen: second, reason: 'adapter_load_fallback' });
  });

  it('never queues behind a full replica while another has room, even under the average bound', () => {
    const replicas = fleet(4);
    const [home, second, third, fourth] = homeOrder(replicas, adapter);
    // capacity 2 each; total 7 + 1 over 4: bound 3, but the first three run 2 of their 2
    replicas.forEach((replica) => (replica.capacity = 2));
    home.load = 2;
    second.load = 2;
    third.load = 2;
    fourth.load = 1;
    expect(choose(replicas, adapter)).toEqual({ chosen: fourth, reason: 'adapter_free_slot' });
  });

  it('with every replica full, waits at the least loaded holder rather than loading elsewhere', () => {
    const replicas = fleet(3);
    const [home, second, third] = homeOrder(replicas, adapter);
    // capacity 4 each: every one full
    home.load = 4;
    second.load = 5;
    third.load = 6;
    second.adapters = holding([], { cpu: [adapter] });
    third.adapters = holding([adapter]);
    expect(choose(replicas, adapter)).toEqual({ chosen: second, reason: 'adapter_cpu' });
    second.adapters = NO_ADAPTERS;
    third.adapters = NO_ADAPTERS;
    expect(choose(replicas, adapter)).toEqual({ chosen: home, reason: 'adapter_home' });
  });

  it('prefers the holder with more free request slots when residency scores are close (a hot adapter spreads over its copies)', () => {
    const replicas = fleet(3);
    const [home, second, third] = homeOrder(replicas, adapter);
    home.adapters = holding([adapter]);
    second.adapters = holding([adapter]);
    // total 5 + 1 over 3: bound 3, both holders under it; ready 1.0 + 2/4 free loses to ready 1.0 + 4/4
    home.load = 2;
    third.load = 3;
    expect(choose(replicas, adapter)).toEqual({ chosen: second, reason: 'adapter_resident' });
    // host memory 0.7 + 4/4 free beats ready 1.0 + 2/4, but not ready 1.0 + 3/4
    second.adapters = holding([], { cpu: [adapter] });
    expect(choose(replicas, adapter)).toEqual({ chosen: second, reason: 'adapter_cpu' });
    home.load = 1;
    expect(choose(replicas, adapter)).toEqual({ chosen: home, reason: 'adapter_resident' });
  });

  it('spills along the adapter\'s rendezvous order, not to whichever replica has a free adapter slot', () => {
    const replicas = fleet(4, 1);
    const [home, second, third] = homeOrder(replicas, adapter);
    home.load = 4;
    second.adapters = holding(['someone-else']);
    expect(choose(replicas, adapter)).toEqual({ chosen: second, reason: 'adapter_evict' });
    second.adapters = NO_ADAPTERS;
    expect(choose(replicas, adapter)).toEqual({ chosen: second, reason: 'adapter_free_slot' });
    second.load = 4;
    expect(choose(replicas, adapter)).toEqual({ chosen: third, reason: 'adapter_free_slot' });
  });

  it('counts a job it just sent as a load under way there (before the heartbeat tells)', () => {
    const replicas = fleet(4);
    const far = homeOrder(replicas, adapter)[2];
    expect(choose(replicas, adapter, (id) => id === far.replicaId)).toEqual({ chosen: far, reason: 'adapter_loading' });
  });

  it('breaks ties among holders by prefix affinity', () => {
    const replicas = fleet(4);
    for (const replica of replicas) replica.adapters = holding([adapter]);
    const bodies = Array.from({ length: 50 }, (_, index) => ({ messages: [{ role: 'system', content: `app ${index}` }, { role: 'user', content: 'hi' }] }));
    const firsts = new Set<string>();
    for (const body of bodies) {
      const key = promptKey(body, 'ws_a')!;
      const chosen = chooseForAdapter(replicas, adapter, DEFAULT_PREFIX_ROUTING, key)!;
      expect(chosen.reason).toBe('adapter_resident');
      expect(chosen.chosen).toBe(rankedOrder(replicas, key, DEFAULT_PREFIX_ROUTING.homeReplicas)[0]);
      firsts.add(chosen.chosen!.replicaId);
    }
    expect(firsts.size).toBeGreaterThan(1);
  });
});

describe('AdapterPlacement under each policy', () => {
  const adapter = ADAPTERS[7];

  it('prefix-aware: a second job before any heartbeat goes where the first went, as loading', () => {
    const placement = () => new AdapterPlacement(placementPolicies(), { prefixRouting: DEFAULT_PREFIX_ROUTING, pendingMs: 1_000 }, () => 0);
    const remembering = placement();
    const replicas = fleet(4);
    const [home, second] = homeOrder(replicas, adapter);
    // Its home at the bound (total 2 + 1 over 4: bound 2): the first job loads it on the next replica.
    home.load = 2;
    expect(remembering.choose('prefix-aware', 'dep_a', adapter, null, replicas)).toEqual({ chosen: second, reason: 'adapter_free_slot' });
    // The home frees up before the second replica's heartbeat tells of the load: the load under way wins over a second load at home.
    home.load = 0;
    expect(remembering.choose('prefix-aware', 'dep_a', adapter, null, replicas)).toEqual({ chosen: second, reason: 'adapter_loading' });
    expect(placement().choose('prefix-aware', 'dep_a', adapter, null, replicas)).toEqual({ chosen: home, reason: 'adapter_home' });
  });

  it('round-robin and least-loaded keep their rule, over the replicas with adapter slots only', () => {
    const placement = new AdapterPlacement(placementPolicies());
    const replicas = fleet(4);
    replicas[1].maxLoras = 0;
    const turns = Array.from({ length: 6 }, () => placement.choose('round-robin', 'dep_a', adapter, null, replicas)!);
    expect(turns.map((turn) => turn.chosen!.replicaId)).toEqual(['rep_0', 'rep_2', 'rep_3', 'rep_0', 'rep_2', 'rep_3']);
    expect(new Set(turns.map((turn) => turn.reason))).toEqual(new Set(['round_robin']));
    replicas[0].load = 3;
    replicas[1].load = 0;
    replicas[2].load = 2;
    replicas[3].load = 1;
    expect(placement.choose('least-loaded', 'dep_a', adapter, null, replicas)).toEqual({ chosen: replicas[3], reason: 'least_loaded' });
    replicas.forEach((replica) => (replica.maxLoras = 0));
    expect(placement.choose('round-robin', 'dep_a', adapter, null, replicas)).toBeNull();
  });
});
