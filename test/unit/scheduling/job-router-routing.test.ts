/**
 * JobRouter with a routing hint (control-plane/cluster/job-router.ts): with `prefix-aware` or
 * `round-robin` and more than one candidate replica (this server's ready connections and the
 * replicas peers list in their load), the routing policy chooses one; a local one gets the job
 * directly, a peer's one through the relay with the replica's id. Every decision is reported
 * with its reason. Without a hint, or with `least-loaded`, load placement (placement/local-or-peer.ts) is kept.
 * Local replicas are real AgentConnections in a real Dispatcher; registry and relay are fakes.
 */
import type { RelayClient } from '../../../control-plane/cluster/relay-client';
import { JobRouter, type RouteHint } from '../../../control-plane/cluster/job-router';
import type { DeploymentLoad, Peer, ServerRegistry } from '../../../control-plane/cluster/server-registry';
import type { AgentConnection } from '../../../control-plane/dispatch/agent-connection';
import { Dispatcher } from '../../../control-plane/dispatch/dispatcher';
import { Job, type DispatchRequest, type JobListener } from '../../../control-plane/dispatch/job';
import { promptKey, type PromptKey } from '../../../control-plane/placement/prompt-key';
import { DEFAULT_PREFIX_ROUTING, rankedOrder } from '../../../control-plane/placement/prefix-aware';
import type { RouteCandidate, RoutingPolicyName, RoutingReason } from '../../../control-plane/placement/placement-policy';
import { agent, events, RecordingListener, request, thrownCode } from './fakes';

interface ReplicaLoad {
  id: string;
  load: number;
  capacity: number;
}

/** A peer's load of dep_a: `replicas` listed (a current server) or not (a server older than routing). */
function deployment(replicas: ReplicaLoad[] | undefined, ready = replicas?.length ?? 1, freeSlots = 4): DeploymentLoad {
  return { ready, freeSlots, inFlight: 0, queued: 0, guestReady: 0, guestSlots: 0, ...(replicas ? { replicas } : {}) };
}

function peer(id: string, replicas: ReplicaLoad[] | undefined, ready?: number, freeSlots?: number): Peer {
  return { id, relayAddress: `${id}:7000`, load: { dep_a: deployment(replicas, ready, freeSlots) } };
}

const idle = (id: string, capacity = 4): ReplicaLoad => ({ id, load: 0, capacity });

/** A relay client that records which peer each job went to, and with which request. */
class FakeRelay {
  readonly runs: Array<{ peer: string; request: DispatchRequest }> = [];

  run(target: Peer, dispatchRequest: DispatchRequest, listener: JobListener): Job {
    this.runs.push({ peer: target.id, request: dispatchRequest });
    return new Job(`relayed_${this.runs.length}`, dispatchRequest, listener, {
      replicaId: dispatchRequest.replicaId ?? `${target.id}/any`, cancelJob: () => {}, creditJob: () => {},
    });
  }
}

interface LocalSpec {
  id: string;
  max?: number;
  busy?: number;
  draining?: boolean;
  closed?: boolean;
}

interface Decision {
  deploymentId: string;
  policy: RoutingPolicyName;
  reason: RoutingReason;
}

function server(locals: LocalSpec[], peers: Peer[]) {
  const dispatcher = new Dispatcher();
  const connections = new Map<string, AgentConnection>();
  for (const spec of locals) {
    const { connection } = agent(dispatcher, { replicaId: spec.id, maxConcurrency: spec.max ?? 4 });
    dispatcher.register(connection);
    for (let job = 0; job < (spec.busy ?? 0); job++) dispatcher.dispatchTo(connection, request(), new RecordingListener());
    connection.draining = spec.draining ?? false;
    connection.closed = spec.closed ?? false;
    connections.set(spec.id, connection);
  }
  const relay = new FakeRelay();
  const registry = { peers: () => peers, onPeers: () => {} } as unknown as ServerRegistry;
  const decisions: Decision[] = [];
  const router = new JobRouter(dispatcher, registry, relay as unknown as RelayClient, (deploymentId, policy, reason) => decisions.push({ deploymentId, policy, reason }));
  let keyCalls = 0;
  /** A hint whose body counts how often the router reads its prompt (promptKey reads `messages` first, every time). */
  const hint = (policy: RoutingPolicyName, key: PromptKey | null = KEYS[0]): RouteHint => {
    const body = key ? BODY_OF.get(key)! : { model: 'model-a', temperature: 0 };
    const fields: Record<string, unknown> = { ...body };
    Object.defineProperty(fields, 'messages', {
      enumerable: true,
      get: () => {
        keyCalls++;
        return body.messages;
      },
    });
    return { policy, fields, tenant: TENANT };
  };
  /** Dispatches one job; where it went: a local replica's id, or `peer:replicaId` for a relayed one. */
  const send = (routeHint?: RouteHint, dispatchRequest: DispatchRequest = request()): string => {
    const before = relay.runs.length;
    const job = router.dispatch(dispatchRequest, new RecordingListener(), routeHint);
    if (relay.runs.length > before) {
      const run = relay.runs[relay.runs.length - 1];
      return `${run.peer}:${run.request.replicaId ?? ''}`;
    }
    return job.replicaId;
  };
  /** Ends a local job (the turn's answer came back). */
  const complete = (job: Job) => connections.get(job.replicaId)?.onJobEvent(events.completed(job.id));
  return { router, dispatcher, connections, relay, decisions, hint, send, complete, keyCalls: () => keyCalls, reasons: () => decisions.map((decision) => decision.reason) };
}

/** The workspace every job of these tests is for. */
const TENANT = 'ws_routing';

/** Chat bodies of 500 conversations of 10 applications, and their keys (BODY_OF: a key's body). */
const BODIES: Array<Record<string, unknown>> = Array.from({ length: 500 }, (_, index) => ({
  model: 'model-a',
  messages: [{ role: 'system', content: `Application ${index % 10}` }, { role: 'user', content: `Conversation ${index}` }],
}));
const KEYS: PromptKey[] = BODIES.map((body) => promptKey(body, TENANT)!);
const BODY_OF = new Map(KEYS.map((key, index) => [key, BODIES[index]]));

/** A fixed key that the policy ranks `replicaId` first for, among `ids` (all idle, equal capacity). */
function keyRanking(ids: string[], replicaId: string): PromptKey {
  const candidates: RouteCandidate[] = ids.map((id) => ({ replicaId: id, load: 0, capacity: 4 }));
  const key = KEYS.find((candidate) => rankedOrder(candidates, candidate, DEFAULT_PREFIX_ROUTING.homeReplicas)[0].replicaId === replicaId);
  if (!key) throw new Error(`no fixed key ranks ${replicaId} first`);
  return key;
}

describe('JobRouter: prefix-aware', () => {
  it('sends the same key to the same local replica turn after turn: prefix_cold, then prefix_hit', () => {
    const setup = server([{ id: 'rep_a' }, { id: 'rep_b' }], []);
    const hint = setup.hint('prefix-aware', KEYS[0]);
    const places = new Set<string>();
    for (let turn = 0; turn < 6; turn++) {
      const job = setup.router.dispatch(request(), new RecordingListener(), hint);
      places.add(job.replicaId);
      setup.complete(job);
    }
    expect(places.size).toBe(1);
    expect([...places][0]).toBe(rankedOrder([{ replicaId: 'rep_a', load: 0, capacity: 4 }, { replicaId: 'rep_b', load: 0, capacity: 4 }], KEYS[0], 2)[0].replicaId);
    expect(setup.reasons()).toEqual(['prefix_cold', 'prefix_hit', 'prefix_hit', 'prefix_hit', 'prefix_hit', 'prefix_hit']);
    expect(setup.decisions.every((decision) => decision.deploymentId === 'dep_a' && decision.policy === 'prefix-aware')).toBe(true);
    expect(setup.relay.runs).toEqual([]);
  });

  it('keys the prompt by the hint\'s tenant: one body of two workspaces is ranked apart, each workspace\'s turns still meet', () => {
    const ids = ['rep_a', 'rep_b', 'rep_c', 'rep_d'];
    const setup = server(ids.map((id) => ({ id })), []);
    const candidates: RouteCandidate[] = ids.map((id) => ({ replicaId: id, load: 0, capacity: 4 }));
    const first = (fields: Record<string, unknown>, tenant: string) => rankedOrder(candidates, promptKey(fields, tenant)!, 2)[0].replicaId;
    // A body whose first-ranked replica differs between the two workspaces (about 3 bodies in 4 are).
    const body = BODIES.find((candidate) => first(candidate, TENANT) !== first(candidate, 'ws_other'))!;
    const where = (tenant: string) => {
      const job = setup.router.dispatch(request(), new RecordingListener(), { policy: 'prefix-aware', fields: body, tenant });
      setup.complete(job);
      return job.replicaId;
    };
    expect(where(TENANT)).toBe(first(body, TENANT));
    expect(where('ws_other')).toBe(first(body, 'ws_other'));
    expect(where(TENANT)).toBe(first(body, TENANT));
    expect(where(TENANT)).not.toBe(where('ws_other'));
  });

  it('stays on the replica while the previous turns still run, under the bound', () => {
    const setup = server([{ id: 'rep_a' }, { id: 'rep_b' }], []);
    const hint = setup.hint('prefix-aware', keyRanking(['rep_a', 'rep_b'], 'rep_a'));
    expect(setup.send(hint)).toBe('rep_a'); // loads 0, 0
    expect(setup.send(hint)).toBe('rep_a'); // loads 1, 0: bound ceil(1.25 × 2 / 2) = 2
    expect(setup.send(hint)).toBe('rep_b'); // loads 2, 0: bound ceil(1.25 × 3 / 2) = 2: past it
    expect(setup.reasons()).toEqual(['prefix_cold', 'prefix_hit', 'load_fallback']);
  });

  it('reports load_fallback and uses the other replica when the first ranked one is past the bound', () => {
    const setup = server([{ id: 'rep_a', busy: 3 }, { id: 'rep_b' }], []);
    // loads 3, 0: bound ceil(1.25 × 4 / 2) = 3
    expect(setup.send(setup.hint('prefix-aware', keyRanking(['rep_a', 'rep_b'], 'rep_a')))).toBe('rep_b');
    expect(setup.reasons()).toEqual(['load_fallback']);
  });

  it('tells a new application on a replica from one it had: prefix_cold per application, then prefix_hit', () => {
    const setup = server([{ id: 'rep_a' }, { id: 'rep_b' }], []);
    const candidates: RouteCandidate[] = [{ replicaId: 'rep_a', load: 0, capacity: 4 }, { replicaId: 'rep_b', load: 0, capacity: 4 }];
    const onA = KEYS.filter((key) => rankedOrder(candidates, key, 2)[0].replicaId === 'rep_a');
    const first = onA[0];
    const second = onA.find((key) => key.application !== first.application)!;
    const sameAppOtherConversation = onA.find((key) => key.application === first.application && key.conversation !== first.conversation)!;
    const sendAndEnd = (key: PromptKey) => {
      const job = setup.router.dispatch(request(), new RecordingListener(), setup.hint('prefix-aware', key));
      expect(job.replicaId).toBe('rep_a');
      setup.complete(job);
    };
    for (const key of [first, first, second, sameAppOtherConversation, second]) sendAndEnd(key);
    // A hit is per application on the replica: another conversation of an application it had is a hit too.
    expect(setup.reasons()).toEqual(['prefix_cold', 'prefix_hit', 'prefix_cold', 'prefix_hit', 'prefix_hit']);
  });

  it('sends a request without a prompt (promptKey null) to the least loaded replica with reason no_prefix', () => {
    // Relative to capacity: rep_a 2/4, rep_b 1/4, rep_c 1/8.
    const setup = server([{ id: 'rep_a', busy: 2 }, { id: 'rep_b', busy: 1 }, { id: 'rep_c', max: 8, busy: 1 }], []);
    expect(setup.send(setup.hint('prefix-aware', null))).toBe('rep_c');
    expect(setup.reasons()).toEqual(['no_prefix']);
    expect(setup.keyCalls()).toBe(1);
  });

  it('sends a lone first user message (cached nowhere yet) to the least loaded replica with reason no_prefix', () => {
    const setup = server([{ id: 'rep_a', busy: 1 }, { id: 'rep_b' }], []);
    const candidates: RouteCandidate[] = [{ replicaId: 'rep_a', load: 0, capacity: 4 }, { replicaId: 'rep_b', load: 0, capacity: 4 }];
    const question = Array.from({ length: 100 }, (_, index) => `q${index}`)
      .find((content) => rankedOrder(candidates, promptKey({ messages: [{ role: 'user', content }] }, TENANT)!, 2)[0].replicaId === 'rep_a')!;
    const firstTurn = { model: 'model-a', messages: [{ role: 'user', content: question }] };
    const secondTurn = { model: 'model-a', messages: [...firstTurn.messages, { role: 'assistant', content: 'a' }, { role: 'user', content: 'b' }] };
    expect(setup.send({ policy: 'prefix-aware', fields: firstTurn, tenant: TENANT })).toBe('rep_b');
    // Keyed alike, a later turn has history to find: it waits for rep_a (load 1, under the bound 2).
    expect(setup.send({ policy: 'prefix-aware', fields: secondTurn, tenant: TENANT })).toBe('rep_a');
    expect(setup.reasons()).toEqual(['no_prefix', 'prefix_cold']);
  });

  it('relays a job to the peer whose replica the key ranks first, with that replica\'s id', () => {
    const peers = [peer('p1', [idle('rep_p1a'), idle('rep_p1b')]), peer('p2', [idle('rep_p2a')])];
    const setup = server([{ id: 'rep_local' }], peers);
    const key = keyRanking(['rep_local', 'rep_p1a', 'rep_p1b', 'rep_p2a'], 'rep_p1b');
    const sent = request({ model: 'model-a', stream: true, body: Buffer.from('{"messages":[{"role":"user","content":"hi"}]}') });
    expect(setup.send(setup.hint('prefix-aware', key), sent)).toBe('p1:rep_p1b');
    expect(setup.relay.runs).toEqual([{ peer: 'p1', request: { ...sent, replicaId: 'rep_p1b' } }]);
    expect(sent.replicaId).toBeUndefined(); // the caller's request is not changed
    expect(setup.connections.get('rep_local')!.inFlight).toBe(0);
    expect(setup.reasons()).toEqual(['prefix_cold']);
  });

  it('dispatches a local job without a replica id on its request', () => {
    const setup = server([{ id: 'rep_a' }], [peer('p1', [idle('rep_p1')])]);
    const key = keyRanking(['rep_a', 'rep_p1'], 'rep_a');
    const job = setup.router.dispatch(request(), new RecordingListener(), setup.hint('prefix-aware', key));
    expect(job.replicaId).toBe('rep_a');
    expect(job.request.replicaId).toBeUndefined();
  });

  it('counts a peer replica\'s reported load against the bound', () => {
    const peers = [peer('p1', [{ id: 'rep_p1', load: 6, capacity: 8 }])];
    const setup = server([{ id: 'rep_a' }], peers);
    // loads 0, 6: bound ceil(1.25 × 7 / 2) = 5: rep_p1 past it
    expect(setup.send(setup.hint('prefix-aware', keyRanking(['rep_a', 'rep_p1'], 'rep_p1')))).toBe('rep_a');
    expect(setup.reasons()).toEqual(['load_fallback']);
  });

  it('chooses the same replica for a conversation on two servers that see each other\'s replicas as peers\'', () => {
    // Server A holds rep_a0, rep_a1 and sees B's rep_b0, rep_b1; server B the other way round. Jobs end at once.
    const serverA = server([{ id: 'rep_a0' }, { id: 'rep_a1' }], [peer('B', [idle('rep_b0'), idle('rep_b1')])]);
    const serverB = server([{ id: 'rep_b0' }, { id: 'rep_b1' }], [peer('A', [idle('rep_a1'), idle('rep_a0')])]);
    const where = (setup: ReturnType<typeof server>, key: PromptKey): string => {
      const job = setup.router.dispatch(request(), new RecordingListener(), setup.hint('prefix-aware', key));
      setup.complete(job);
      return job.replicaId;
    };
    const used = new Set<string>();
    for (const key of KEYS.slice(0, 100)) {
      const chosen = where(serverA, key);
      expect(where(serverB, key)).toBe(chosen);
      used.add(chosen);
    }
    expect(used).toEqual(new Set(['rep_a0', 'rep_a1', 'rep_b0', 'rep_b1']));
  });
});

describe('JobRouter: when the prompt key is not computed', () => {
  it.each<RoutingPolicyName>(['least-loaded', 'round-robin'])('never reads the prompt for %s', (policy) => {
    const setup = server([{ id: 'rep_a' }, { id: 'rep_b' }], [peer('p1', [idle('rep_p1')])]);
    for (let index = 0; index < 4; index++) setup.send(setup.hint(policy));
    expect(setup.keyCalls()).toBe(0);
  });

  it('never reads the prompt when only one replica is a candidate: reason only_replica', () => {
    const setup = server([{ id: 'rep_a' }], []);
    expect(setup.send(setup.hint('prefix-aware'))).toBe('rep_a');
    expect(setup.send(setup.hint('round-robin'))).toBe('rep_a');
    expect(setup.keyCalls()).toBe(0);
    expect(setup.reasons()).toEqual(['only_replica', 'only_replica']);
    expect(setup.decisions.map((decision) => decision.policy)).toEqual(['prefix-aware', 'round-robin']);
  });

  it('counts a peer\'s single listed replica as the only candidate too', () => {
    const setup = server([], [peer('p1', [idle('rep_p1')])]);
    // The fallback placement relays it to the peer, without a replica id (the peer chooses).
    expect(setup.send(setup.hint('prefix-aware'))).toBe('p1:');
    expect(setup.keyCalls()).toBe(0);
    expect(setup.reasons()).toEqual(['only_replica']);
  });
});

describe('JobRouter: round-robin', () => {
  it('cycles over local and peer replicas in replica id order', () => {
    const peers = [peer('p1', [idle('rep_c'), idle('rep_a')]), peer('p2', [idle('rep_e')])];
    const setup = server([{ id: 'rep_d' }, { id: 'rep_b', busy: 3 }], peers);
    const places = Array.from({ length: 10 }, () => setup.send(setup.hint('round-robin')));
    expect(places).toEqual(['p1:rep_a', 'rep_b', 'p1:rep_c', 'rep_d', 'p2:rep_e', 'p1:rep_a', 'rep_b', 'p1:rep_c', 'rep_d', 'p2:rep_e']);
    expect(new Set(setup.reasons())).toEqual(new Set(['round_robin']));
    expect(setup.relay.runs.map((run) => run.request.replicaId)).toEqual(['rep_a', 'rep_c', 'rep_e', 'rep_a', 'rep_c', 'rep_e']);
  });

  it('keeps a turn per deployment', () => {
    const setup = server([{ id: 'rep_a' }, { id: 'rep_b' }], []);
    const { connection } = agent(setup.dispatcher, { replicaId: 'rep_x', deploymentId: 'dep_b' });
    setup.dispatcher.register(connection);
    const { connection: other } = agent(setup.dispatcher, { replicaId: 'rep_y', deploymentId: 'dep_b' });
    setup.dispatcher.register(other);
    const onB = () => setup.send(setup.hint('round-robin'), request({ deploymentId: 'dep_b' }));
    expect([setup.send(setup.hint('round-robin')), onB(), setup.send(setup.hint('round-robin')), onB()]).toEqual(['rep_a', 'rep_x', 'rep_b', 'rep_y']);
  });
});

describe('JobRouter: which replicas are candidates', () => {
  it('leaves draining and closed local replicas out', () => {
    const setup = server([{ id: 'rep_a', draining: true }, { id: 'rep_b', closed: true }, { id: 'rep_c' }, { id: 'rep_d' }], []);
    const places = Array.from({ length: 4 }, () => setup.send(setup.hint('round-robin')));
    expect(places).toEqual(['rep_c', 'rep_d', 'rep_c', 'rep_d']);
  });

  it('has one candidate left when the other local replica drains: only_replica, no key', () => {
    const setup = server([{ id: 'rep_a', draining: true }, { id: 'rep_b' }], []);
    expect(setup.send(setup.hint('prefix-aware'))).toBe('rep_b');
    expect(setup.reasons()).toEqual(['only_replica']);
    expect(setup.keyCalls()).toBe(0);
  });

  it('leaves out the replicas of peers that do not list them (older servers)', () => {
    const setup = server([{ id: 'rep_a' }, { id: 'rep_b' }], [peer('old', undefined, 3, 12)]);
    const places = Array.from({ length: 4 }, () => setup.send(setup.hint('round-robin')));
    expect(places).toEqual(['rep_a', 'rep_b', 'rep_a', 'rep_b']);
    expect(setup.relay.runs).toEqual([]);
  });

  it('still reaches an older peer through the fallback placement when no replica is here', () => {
    const setup = server([], [peer('old', undefined, 2, 0)]);
    const sent = request();
    expect(setup.send(setup.hint('prefix-aware'), sent)).toBe('old:');
    expect(setup.relay.runs).toEqual([{ peer: 'old', request: sent }]);
    expect(setup.reasons()).toEqual(['only_replica']);
    expect(setup.keyCalls()).toBe(0);
  });

  it('uses the local replica over an older peer with more free slots (the fallback placement)', () => {
    const setup = server([{ id: 'rep_a', busy: 3 }], [peer('old', undefined, 4, 16)]);
    expect(setup.send(setup.hint('prefix-aware'))).toBe('rep_a');
    expect(setup.reasons()).toEqual(['only_replica']);
  });

  it('throws no_replica_available with a hint when no replica is anywhere, and reports no decision', () => {
    const setup = server([{ id: 'rep_a', draining: true }], [peer('old', undefined, 0, 0), peer('p2', [])]);
    expect(thrownCode(() => setup.router.dispatch(request(), new RecordingListener(), setup.hint('prefix-aware')))).toBe('no_replica_available');
    expect(setup.reasons()).toEqual([]);
    expect(setup.keyCalls()).toBe(0);
  });
});

describe('JobRouter: least-loaded and no hint keep the old placement', () => {
  it('takes a free local slot over an idle peer replica with hint least-loaded: reason least_loaded', () => {
    const setup = server([{ id: 'rep_a', busy: 3 }, { id: 'rep_b', busy: 1 }], [peer('p1', [idle('rep_p1', 16)], 1, 16)]);
    expect(setup.send(setup.hint('least-loaded'))).toBe('rep_b');
    expect(setup.reasons()).toEqual(['least_loaded']);
    expect(setup.relay.runs).toEqual([]);
  });

  it('relays to the peer with the most free slots, without a replica id, when every local replica is full', () => {
    const peers = [peer('p1', [idle('rep_p1')], 1, 1), peer('p2', [idle('rep_p2')], 1, 3)];
    const setup = server([{ id: 'rep_a', max: 2, busy: 2 }], peers);
    const sent = request();
    expect(setup.send(setup.hint('least-loaded'), sent)).toBe('p2:');
    expect(setup.relay.runs).toEqual([{ peer: 'p2', request: sent }]);
    expect(setup.reasons()).toEqual(['least_loaded']);
  });

  it('places the same way without a hint, and reports nothing', () => {
    const peers = [peer('p1', [idle('rep_p1')], 1, 1)];
    const withHint = server([{ id: 'rep_a', busy: 3 }, { id: 'rep_b', busy: 1 }], peers);
    const without = server([{ id: 'rep_a', busy: 3 }, { id: 'rep_b', busy: 1 }], peers);
    expect(without.send()).toBe(withHint.send(withHint.hint('least-loaded')));
    expect(without.decisions).toEqual([]);
    expect(without.keyCalls()).toBe(0);
  });
});
