import type { Peer } from './server-registry';

/** A peer server's offer for a job: one of its replicas' deployment and the slots it reports free. */
export interface PeerOffer {
  readonly peer: Peer;
  readonly deploymentId: string;
  readonly slots: number;
}

export type Placement<Local> =
  | { readonly kind: 'local'; readonly local: Local }
  | { readonly kind: 'peer'; readonly offer: PeerOffer };

/**
 * Where a job runs, one policy for owners and guests alike: the best replica whose agent this
 * server holds when it has a free slot (no hop), else the peer offering the most free slots
 * (relayed; its load is at most a registry heartbeat old), else, for work that may wait in an
 * agent's queue (an owner's), the local replica anyway or, with none here, any peer that has the
 * deployment. Guests never queue: they only take a slot that is idle now. Null: nowhere.
 * `offers` is only asked for when the local replica has no free slot (the common case costs no scan).
 */
export function placeJob<Local>(local: Local | null, localSlots: number, offers: () => Iterable<PeerOffer>, mayQueue: boolean): Placement<Local> | null {
  if (local && localSlots > 0) return { kind: 'local', local };
  let best: PeerOffer | null = null;
  let floor = mayQueue && !local ? -1 : 0;
  for (const offer of offers()) {
    if (offer.slots > floor) {
      best = offer;
      floor = offer.slots;
    }
  }
  if (best) return { kind: 'peer', offer: best };
  return local && mayQueue ? { kind: 'local', local } : null;
}
