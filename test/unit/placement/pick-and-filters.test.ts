/**
 * The placement module's parts (control-plane/placement/): filter → score → pick, the filters
 * and scores each caller uses (owners: takesWork; guests: takesGuests and guest slots; media and
 * batch lines: free slots), the cross-server rule (local or peer) and a batch line's replica.
 * Replicas are plain objects: the module knows no connection.
 */
import { takesGuests, takesWork } from '../../../control-plane/placement/filters';
import { lineReplica } from '../../../control-plane/placement/line-replica';
import { localOrPeer } from '../../../control-plane/placement/local-or-peer';
import { pickBest } from '../../../control-plane/placement/pick';
import { guestSlotsOn, mostFree } from '../../../control-plane/placement/slots';

interface Replica {
  id: string;
  draining: boolean;
  closed: boolean;
  priorityScheduling: boolean;
  freeSlots: number;
  maxConcurrency: number;
  inFlight: number;
  batchInFlight: number;
  guestInFlight: number;
  reserved: number;
  maxLoras?: number;
}

function replica(id: string, fields: Partial<Replica> = {}): Replica {
  return {
    id, draining: false, closed: false, priorityScheduling: true, freeSlots: 0,
    maxConcurrency: 8, inFlight: 0, batchInFlight: 0, guestInFlight: 0, reserved: 0, ...fields,
  };
}

const ids = (replicas: ReadonlyArray<Replica | null>) => replicas.map((chosen) => chosen?.id ?? null);

describe('pickBest', () => {
  const scored = [{ id: 'a', score: 1 }, { id: 'b', score: 3 }, { id: 'c', score: 3 }, { id: 'd', score: 2 }];
  const score = (candidate: { score: number }) => candidate.score;

  it('takes the highest score; a tie goes to the first met', () => {
    expect(pickBest(scored, score)?.id).toBe('b');
  });

  it('counts from `start`, so a rotating start spreads ties', () => {
    expect(pickBest(scored, score, 0, undefined, 2)?.id).toBe('c');
    expect(pickBest(scored, score, 0, undefined, 3)?.id).toBe('b');
  });

  it('skips what the filter refuses', () => {
    expect(pickBest(scored, score, 0, (candidate) => candidate.id !== 'b')?.id).toBe('c');
  });

  it('needs a score above the floor (0 unless told), or no floor at all with null', () => {
    const low = [{ id: 'a', score: 0 }, { id: 'b', score: -1 }];
    expect(pickBest(low, score)).toBeNull();
    expect(pickBest(low, score, -2)?.id).toBe('a');
    expect(pickBest([{ id: 'a', score: Number.NEGATIVE_INFINITY }], score, null)?.id).toBe('a');
    expect(pickBest([], score, null)).toBeNull();
  });
});

describe('filters', () => {
  it('owners, media and batch lines: a replica takes work unless draining or closed', () => {
    expect([replica('a'), replica('b', { draining: true }), replica('c', { closed: true })].map(takesWork)).toEqual([true, false, false]);
  });

  it('guests: only a ready replica whose engine keeps guests behind its owner', () => {
    const replicas = [replica('a'), replica('b', { priorityScheduling: false }), replica('c', { draining: true }), replica('d', { closed: true })];
    expect(replicas.map(takesGuests)).toEqual([true, false, false, false]);
  });
});

describe('mostFree (media jobs, batch lines)', () => {
  it('the replica with the most free slots, the first on a tie, none when no slot is free', () => {
    expect(mostFree([replica('a', { freeSlots: 1 }), replica('b', { freeSlots: 3 }), replica('c', { freeSlots: 3 })])?.id).toBe('b');
    expect(mostFree([replica('a'), replica('b', { freeSlots: -1 })])).toBeNull();
    expect(mostFree([])).toBeNull();
  });
});

describe('guestSlotsOn (guests)', () => {
  const rules = { ownerHeadroomFraction: 0.25, maxGuestsPerReplica: 16 };

  it('keeps the owner\'s headroom (a quarter, at least one slot) free', () => {
    expect(guestSlotsOn(replica('a'), rules)).toBe(6);
    expect(guestSlotsOn(replica('a', { maxConcurrency: 2 }), rules)).toBe(1);
    expect(guestSlotsOn(replica('a', { inFlight: 3, reserved: 1 }), rules)).toBe(2);
    expect(guestSlotsOn(replica('a', { inFlight: 8 }), rules)).toBe(0);
  });

  it('counts slots running batch lines as idle', () => {
    expect(guestSlotsOn(replica('a', { inFlight: 4, batchInFlight: 4 }), rules)).toBe(6);
  });

  it('stops at the guest bound', () => {
    expect(guestSlotsOn(replica('a'), { ownerHeadroomFraction: 0.25, maxGuestsPerReplica: 4 })).toBe(4);
    expect(guestSlotsOn(replica('a', { inFlight: 3, guestInFlight: 3 }), { ownerHeadroomFraction: 0.25, maxGuestsPerReplica: 4 })).toBe(1);
  });

  it('is none on a replica that takes no guests', () => {
    expect(guestSlotsOn(replica('a', { priorityScheduling: false }), rules)).toBe(0);
    expect(guestSlotsOn(replica('a', { draining: true }), rules)).toBe(0);
  });
});

describe('localOrPeer', () => {
  const offers = [{ peer: 'p1', slots: 0 }, { peer: 'p2', slots: 2 }, { peer: 'p3', slots: 2 }];

  it('a local replica with a free slot, without asking the peers', () => {
    const asked = jest.fn(() => offers);
    expect(localOrPeer('here', 1, asked, true)).toEqual({ kind: 'local', local: 'here' });
    expect(asked).not.toHaveBeenCalled();
  });

  it('else the peer offering the most free slots (the first on a tie)', () => {
    expect(localOrPeer('here', 0, () => offers, true)).toEqual({ kind: 'peer', offer: offers[1] });
    expect(localOrPeer(null, 0, () => offers, false)).toEqual({ kind: 'peer', offer: offers[1] });
  });

  it('an owner\'s job queues: on the local replica, or with none here on any peer with the deployment', () => {
    const full = [{ peer: 'p1', slots: 0 }];
    expect(localOrPeer('here', 0, () => full, true)).toEqual({ kind: 'local', local: 'here' });
    expect(localOrPeer(null, 0, () => full, true)).toEqual({ kind: 'peer', offer: full[0] });
  });

  it('a guest never queues: nowhere when no slot is free', () => {
    expect(localOrPeer('here', 0, () => [{ peer: 'p1', slots: 0 }], false)).toBeNull();
    expect(localOrPeer(null, 0, () => [], false)).toBeNull();
  });
});

describe('lineReplica (batch lines)', () => {
  it('a line\'s first job goes to its reserved slot\'s replica, without looking at the others', () => {
    const reserved = replica('r');
    const others = jest.fn(() => [replica('a', { freeSlots: 4 })]);
    expect(lineReplica(reserved, true, others)?.id).toBe('r');
    expect(others).not.toHaveBeenCalled();
  });

  it('a later job to the replica with the most free slots, else back to the reserved one', () => {
    const reserved = replica('r');
    expect(ids([lineReplica(reserved, false, () => [replica('a', { freeSlots: 1 }), replica('b', { freeSlots: 2 })])])).toEqual(['b']);
    expect(lineReplica(reserved, false, () => [replica('a')])?.id).toBe('r');
  });

  it('never to a reserved replica that stopped taking work', () => {
    const draining = replica('r', { draining: true });
    expect(lineReplica(draining, true, () => [replica('a', { freeSlots: 1 })])?.id).toBe('a');
    expect(lineReplica(draining, true, () => [])).toBeNull();
    expect(lineReplica(replica('r', { closed: true }), false, () => [])).toBeNull();
  });

  it('a line addressed to an adapter passes over a reserved replica without adapter slots', () => {
    const reserved = replica('r', { freeSlots: 4 });
    const withSlots = replica('a', { freeSlots: 1, maxLoras: 4 });
    expect(lineReplica(reserved, true, () => [reserved, withSlots], true)?.id).toBe('a');
    // a reserved replica with adapter slots keeps its first job
    const reservedWithSlots = replica('s', { maxLoras: 2 });
    expect(lineReplica(reservedWithSlots, true, () => [reservedWithSlots, withSlots], true)?.id).toBe('s');
  });

  it('a later part of an adapter\'s line: the replica with adapter slots and the most free slots, never one without', () => {
    const reserved = replica('r');
    const big = replica('b', { freeSlots: 6 });
    const small = replica('a', { freeSlots: 1, maxLoras: 4 });
    expect(lineReplica(reserved, false, () => [big, small], true)?.id).toBe('a');
    // none with adapter slots free: one with adapter slots that takes work (its job waits there)
    const busy = replica('c', { maxLoras: 4 });
    expect(lineReplica(reserved, false, () => [big, busy], true)?.id).toBe('c');
    // none with adapter slots at all, or only draining ones: nowhere
    expect(lineReplica(reserved, false, () => [big], true)).toBeNull();
    expect(lineReplica(reserved, true, () => [big, replica('d', { maxLoras: 4, freeSlots: 3, draining: true })], true)).toBeNull();
  });
});
