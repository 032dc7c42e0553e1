/**
 * SharedPool: owners before guests. A replica lends a guest only a slot its owner leaves idle,
 * beyond a headroom of `ownerHeadroomFraction` of its slots (at least one) and up to
 * `maxGuestsPerReplica` guests (owner jobs never count against that cap); only shared, serving
 * deployments' priority-scheduling replicas take guests; a local slot is preferred to a peer's;
 * no slot anywhere is `busy`, no provider at all `unavailable`.
 */
import type { GuestPlacement } from '../../../control-plane/sharing/shared-pool';
import { flush } from './fakes';
import { chatModel, deployment, guestPeer, SHARED_MODEL, sharingWorld, type ReplicaSpec } from './sharing-fixtures';

function where(placement: GuestPlacement): string {
  switch (placement.kind) {
    case 'replica': return `replica:${placement.connection.replicaId}`;
    case 'peer': return `peer:${placement.peer.id}/${placement.deploymentId}`;
    default: return placement.kind;
  }
}

describe('SharedPool guest slots of one replica', () => {
  test.each<[string, ReplicaSpec, { ownerHeadroomFraction?: number; maxGuestsPerReplica?: number }, number]>([
    ['an idle replica of 8 keeps 2 (25 %) for its owner', { max: 8 }, {}, 6],
    ['owner jobs take idle slots first', { max: 8, owners: 5 }, {}, 1],
    ['the owner\'s headroom is never lent, even when it is all that is idle', { max: 8, owners: 6 }, {}, 0],
    ['an owner over its headroom leaves nothing', { max: 8, owners: 8 }, {}, 0],
    ['a small replica keeps at least one slot (25 % of 2 rounds up)', { max: 2 }, {}, 1],
    ['a headroom of 0 % still keeps one slot', { max: 4 }, { ownerHeadroomFraction: 0 }, 3],
    ['a headroom fraction rounds up: 25 % of 3 is 1', { max: 3 }, {}, 2],
    ['a headroom fraction rounds up: 25 % of 10 is 3', { max: 10 }, {}, 7],
    ['a larger headroom', { max: 8 }, { ownerHeadroomFraction: 0.5 }, 4],
    ['guests already running take slots too', { max: 8, guests: 2 }, {}, 4],
    ['slots a scheduler reserved are taken', { max: 8, reserved: 3 }, {}, 3],
    ['at most maxGuestsPerReplica guests at once', { max: 32, guests: 3 }, { maxGuestsPerReplica: 4 }, 1],
    ['none once the guest cap is reached', { max: 32, guests: 4 }, { maxGuestsPerReplica: 4 }, 0],
    ['owner jobs do not count against the guest cap', { max: 32, owners: 10 }, { maxGuestsPerReplica: 4 }, 4],
    ['none with a guest cap of 0', { max: 8 }, { maxGuestsPerReplica: 0 }, 0],
    ['none without priority scheduling (the engine could not put the owner first)', { max: 8, priority: false }, {}, 0],
    ['none on a draining replica', { max: 8, draining: true }, {}, 0],
    ['none on a closed replica', { max: 8, closed: true }, {}, 0],
  ])('%s', (_name, spec, config, expected) => {
    const world = sharingWorld({ config });
    const connection = world.replica(spec);
    expect(world.pool.guestSlots(connection)).toBe(expected);
  });

  test('a guest job counts as a guest on its replica until it ends; an owner job only as load', () => {
    const world = sharingWorld({ config: { maxGuestsPerReplica: 1 } });
    const connection = world.replica({ max: 16 });
    world.occupy(connection, 3, 0);
    expect(connection.guestInFlight).toBe(0);
    expect(world.pool.guestSlots(connection)).toBe(1);
    world.occupy(connection, 0, 1);
    expect(connection.guestInFlight).toBe(1);
    expect(world.pool.guestSlots(connection)).toBe(0);
    const guestJob = [...connection.jobs.values()].find((job) => job.request.guest)!;
    connection.onJobEvent({ jobId: guestJob.id, event: 'completed', completed: { finishReason: 'stop' } });
    expect(connection.guestInFlight).toBe(0);
    expect(world.pool.guestSlots(connection)).toBe(1);
  });
});

describe('SharedPool placement of a guest request', () => {
  test('the local replica with the most guest slots, over every shared deployment of the model', () => {
    const world = sharingWorld();
    world.update({ id: 'dep_a' });
    world.update({ id: 'dep_b', workspaceId: 'ws_other' });
    world.replica({ deploymentId: 'dep_a', replicaId: 'a1', max: 8, owners: 4 });
    world.replica({ deploymentId: 'dep_b', replicaId: 'b1', max: 8, owners: 1 });
    world.replica({ deploymentId: 'dep_b', replicaId: 'b2', max: 8, owners: 3 });
    expect(where(world.pool.place(SHARED_MODEL))).toBe('replica:b1');
  });

  test.each<[string, Parameters<ReturnType<typeof sharingWorld>['update']>[0]]>([
    ['sharing is off', { sharing: 'not_shared' }],
    ['sharing is still activating (replicas restarting with priority scheduling)', { sharing: 'activating' }],
    ['the deployment is paused', { status: 'Paused' }],
    ['the deployment is deleted', { status: 'Deleted' }],
    ['the deployment serves another model', { modelId: 'acme/other' }],
  ])('a deployment is no provider when %s: unavailable', (_name, overrides) => {
    const world = sharingWorld();
    world.update(overrides);
    world.replica({ max: 8 });
    expect(world.pool.place(SHARED_MODEL)).toEqual({ kind: 'unavailable' });
  });

  test('a Creating deployment that is shared takes guests on its ready replicas', () => {
    const world = sharingWorld();
    world.update({ status: 'Creating' });
    world.replica({ replicaId: 'c1' });
    expect(where(world.pool.place(SHARED_MODEL))).toBe('replica:c1');
  });

  test('turning sharing off removes the deployment at once; turning it on adds it back', () => {
    const world = sharingWorld();
    world.update();
    world.replica({ replicaId: 'a1' });
    expect(where(world.pool.place(SHARED_MODEL))).toBe('replica:a1');
    world.update({ sharing: 'not_shared' });
    expect(where(world.pool.place(SHARED_MODEL))).toBe('unavailable');
    world.update({ sharing: 'shared' });
    expect(where(world.pool.place(SHARED_MODEL))).toBe('replica:a1');
  });

  test.each<[string, ReplicaSpec[], string]>([
    ['busy when every provider\'s idle slots are its owner\'s headroom', [{ max: 8, owners: 6 }, { max: 4, owners: 3 }], 'busy'],
    ['busy when every provider is at its guest cap', [{ max: 64, guests: 16 }], 'busy'],
    ['unavailable when no replica runs with priority scheduling', [{ max: 8, priority: false }], 'unavailable'],
    ['unavailable when every replica is draining', [{ max: 8, draining: true }], 'unavailable'],
    ['unavailable when every replica is closed', [{ max: 8, closed: true }], 'unavailable'],
    ['unavailable with no replica at all', [], 'unavailable'],
  ])('%s', (_name, replicas, expected) => {
    const world = sharingWorld();
    world.update();
    for (const spec of replicas) world.replica(spec);
    expect(where(world.pool.place(SHARED_MODEL))).toBe(expected);
  });

  test('a guest\'s job for an owner\'s adapter takes only replicas with adapter slots, here and on peers', () => {
    const peer = guestPeer('p1', { dep_a: { guestReady: 1, guestSlots: 4 } });
    const world = sharingWorld({ peers: [peer] });
    world.update({ id: 'dep_a' });
    world.replica({ deploymentId: 'dep_a', replicaId: 'plain', max: 8 });
    world.replica({ deploymentId: 'dep_a', replicaId: 'lora', max: 8, owners: 4, maxLoras: 4 });
    expect(where(world.pool.place(SHARED_MODEL))).toBe('replica:plain');
    expect(where(world.pool.place(SHARED_MODEL, true))).toBe('replica:lora');
    expect(world.pool.placeHere('dep_a')?.replicaId).toBe('plain');
    expect(world.pool.placeHere('dep_a', true)?.replicaId).toBe('lora');
    // the replica with adapter slots full: a peer only when its row lists a replica with adapter slots
    world.occupy(world.dispatcher.connections('dep_a').find((connection) => connection.replicaId === 'lora')!, 2);
    expect(world.pool.place(SHARED_MODEL, true).kind).toBe('busy');
    peer.load.dep_a.replicas = [{ id: 'p1_r', load: 0, capacity: 8, maxLoras: 4 }];
    expect(where(world.pool.place(SHARED_MODEL, true))).toBe('peer:p1/dep_a');
  });

  test('a guest\'s job for an adapter with no replica offering adapter slots anywhere: unavailable', () => {
    const world = sharingWorld();
    world.update({ id: 'dep_a' });
    world.replica({ deploymentId: 'dep_a', max: 8 });
    expect(world.pool.place(SHARED_MODEL, true).kind).toBe('unavailable');
    expect(world.pool.placeHere('dep_a', true)).toBeNull();
  });

  test('a local slot is preferred to a peer\'s, even when the peer reports more', () => {
    const world = sharingWorld({ peers: [guestPeer('p1', { dep_a: { guestReady: 2, guestSlots: 12 } })] });
    world.update();
    world.replica({ replicaId: 'a1', max: 8, owners: 5 });
    expect(where(world.pool.place(SHARED_MODEL))).toBe('replica:a1');
  });

  test('the peer reporting the most guest slots for one deployment, with that deployment\'s owner', () => {
    const world = sharingWorld({
      peers: [
        guestPeer('p1', { dep_a: { guestReady: 1, guestSlots: 2 }, dep_b: { guestReady: 1, guestSlots: 5 } }),
        guestPeer('p2', { dep_a: { guestReady: 1, guestSlots: 3 }, dep_x: { guestReady: 1, guestSlots: 50 } }),
      ],
    });
    world.update({ id: 'dep_a', workspaceId: 'ws_a' });
    world.update({ id: 'dep_b', workspaceId: 'ws_b' });
    world.replica({ deploymentId: 'dep_a', max: 8, owners: 8 }); // a provider here, but full
    // Idle guest slots over the pool: 2 + 5 on p1, 3 on p2 (dep_x shares another model), none here.
    expect(world.pool.place(SHARED_MODEL)).toEqual({ kind: 'peer', peer: world.peers[0], deploymentId: 'dep_b', ownerWorkspaceId: 'ws_b', idleSlots: 10 });
  });

  test.each<[string, { guestReady: number; guestSlots: number }, string]>([
    ['busy when a peer provides but has no guest slot', { guestReady: 1, guestSlots: 0 }, 'busy'],
    ['unavailable when a peer holds replicas but none takes guests', { guestReady: 0, guestSlots: 0 }, 'unavailable'],
  ])('%s', (_name, load, expected) => {
    const world = sharingWorld({ peers: [guestPeer('p1', { dep_a: load })] });
    world.update();
    expect(where(world.pool.place(SHARED_MODEL))).toBe(expected);
  });

  test('placeHere: a relayed guest gets the replica of its deployment with the most guest slots, or none', () => {
    const world = sharingWorld();
    world.update();
    world.replica({ replicaId: 'a1', max: 8, owners: 4 });
    world.replica({ replicaId: 'a2', max: 8, owners: 2 });
    world.replica({ replicaId: 'a3', max: 8, priority: false });
    expect(world.pool.placeHere('dep_a')?.replicaId).toBe('a2');
    expect(world.pool.placeHere('dep_unknown')).toBeNull();
    const full = sharingWorld();
    full.replica({ max: 8, owners: 7 });
    expect(full.pool.placeHere('dep_a')).toBeNull();
  });
});

describe('SharedPool models as guests see them', () => {
  test.each<[string, Parameters<typeof chatModel>[0]]>([
    ['not a chat model', { task: 'completion' }],
    ['not official', { official: false }],
    ['without shared prices', { sharedPricing: undefined }],
    ['on an engine without priority scheduling', { engine: 'llama.cpp' }],
  ])('a model %s is not shareable', (_name, overrides) => {
    const world = sharingWorld({ models: [chatModel(overrides)] });
    expect(world.pool.priced(SHARED_MODEL)).toBeNull();
    expect(world.pool.model(SHARED_MODEL)).toBeNull();
    expect(world.pool.models()).toEqual([]);
  });

  test('a disabled model and an unknown one are not shareable', () => {
    const world = sharingWorld();
    world.catalog.setEnabled(SHARED_MODEL, false);
    expect(world.pool.priced(SHARED_MODEL)).toBeNull();
    expect(world.pool.priced('acme/unknown')).toBeNull();
  });

  test('prices are exact decimal strings', () => {
    const world = sharingWorld();
    expect(world.pool.priced(SHARED_MODEL)).toEqual({ modelId: SHARED_MODEL, prices: { inputPerMillion: '0.1', outputPerMillion: '0.4' } });
  });

  test.each<[string, ReplicaSpec[], { guestReady: number; guestSlots: number } | null, { availability: string; idleGuestSlots: number }]>([
    ['Unavailable with no provider', [], null, { availability: 'Unavailable', idleGuestSlots: 0 }],
    ['Available with idle guest slots here', [{ max: 8 }, { max: 8, owners: 4 }], null, { availability: 'Available', idleGuestSlots: 8 }],
    ['Degraded when every slot is the owner\'s', [{ max: 8, owners: 6 }], null, { availability: 'Degraded', idleGuestSlots: 0 }],
    ['Available through a peer\'s slots', [], { guestReady: 1, guestSlots: 3 }, { availability: 'Available', idleGuestSlots: 3 }],
    ['counting slots here and on peers', [{ max: 8 }], { guestReady: 1, guestSlots: 3 }, { availability: 'Available', idleGuestSlots: 9 }],
  ])('availability: %s', (_name, replicas, peerLoad, expected) => {
    const world = sharingWorld({ peers: peerLoad ? [guestPeer('p1', { dep_a: peerLoad })] : [] });
    world.update();
    for (const spec of replicas) world.replica(spec);
    expect(world.pool.model(SHARED_MODEL)).toMatchObject(expected);
  });

  test('Degraded when more than 20 % of the last minute\'s guests were refused, though a slot is idle', () => {
    const world = sharingWorld();
    world.update();
    world.replica({ max: 8 });
    const traffic = world.pool.trafficOf(SHARED_MODEL);
    for (let index = 0; index < 4; index++) traffic.admitted();
    traffic.refused();
    expect(world.pool.model(SHARED_MODEL)!.availability).toBe('Available'); // 1 of 5 = 20 %
    traffic.refused();
    expect(world.pool.model(SHARED_MODEL)!.availability).toBe('Degraded');
  });

  test('a replica on the CPU stand-in engine marks the model standIn', () => {
    const world = sharingWorld();
    world.update();
    world.replica({ engineKind: 'vllm' });
    expect(world.pool.model(SHARED_MODEL)!.standIn).toBe(false);
    world.replica({ engineKind: 'cpu' });
    expect(world.pool.model(SHARED_MODEL)!.standIn).toBe(true);
  });
});

describe('SharedPool members over time', () => {
  beforeEach(() => jest.useFakeTimers({ doNotFake: ['setImmediate', 'nextTick', 'queueMicrotask', 'performance'] }));
  afterEach(() => jest.useRealTimers());

  test('start loads the shared, serving deployments from the store', async () => {
    const world = sharingWorld();
    world.store.shared = [deployment({ id: 'dep_a' }), deployment({ id: 'dep_paused', status: 'Paused' })];
    world.replica({ deploymentId: 'dep_paused', replicaId: 'paused1' });
    await world.pool.start();
    expect(where(world.pool.place(SHARED_MODEL))).toBe('unavailable');
    world.replica({ deploymentId: 'dep_a', replicaId: 'a1' });
    expect(where(world.pool.place(SHARED_MODEL))).toBe('replica:a1');
    world.pool.stop();
  });

  test('a missed notification heals at the next tick, and each change of availability is announced once', async () => {
    const world = sharingWorld();
    const announced: string[] = [];
    world.events.on('sharedModelUpdated', (model) => announced.push(model.availability));
    const connection = world.replica({ max: 8 });
    await world.pool.start();
    await jest.advanceTimersByTimeAsync(world.config.availabilityIntervalMs);
    expect(where(world.pool.place(SHARED_MODEL))).toBe('unavailable');
    expect(announced).toEqual([]); // the first look is no change

    // Shared on another server; its notification never reached this one.
    world.store.shared = [deployment()];
    await jest.advanceTimersByTimeAsync(world.config.availabilityIntervalMs);
    expect(where(world.pool.place(SHARED_MODEL))).toBe(`replica:${connection.replicaId}`);
    expect(announced).toEqual(['Available']);

    await jest.advanceTimersByTimeAsync(world.config.availabilityIntervalMs);
    expect(announced).toEqual(['Available']);

    world.occupy(connection, 6);
    await jest.advanceTimersByTimeAsync(world.config.availabilityIntervalMs);
    expect(announced).toEqual(['Available', 'Degraded']);
    world.pool.stop();
  });

  test('a failed reload keeps the last members and logs a warning', async () => {
    const world = sharingWorld();
    world.update();
    const connection = world.replica({ max: 8 });
    await world.pool.start();
    world.store.failing = true;
    await jest.advanceTimersByTimeAsync(world.config.availabilityIntervalMs);
    await flush(1);
    expect(world.log.warnings).toEqual(['could not reload the shared pool; keeping the last members']);
    expect(where(world.pool.place(SHARED_MODEL))).toBe(`replica:${connection.replicaId}`);
    world.pool.stop();
  });
});
