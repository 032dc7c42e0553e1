/** Another server's offer for a job: the slots it reports free (at most a registry heartbeat old). */
export interface SlotOffer {
  readonly slots: number;
}

export type LocalOrPeer<Local, Offer extends SlotOffer> =
  | { readonly kind: 'local'; readonly local: Local }
  | { readonly kind: 'peer'; readonly offer: Offer };

/**
 * Where a job runs across servers, one rule for owners and guests alike: the replica this
 * server chose when it has a free slot (no hop), else the peer offering the most free slots
 * (relayed; ties: the first), else, for work that may wait in an agent's queue (an owner's),
 * the local replica anyway or, with none here, any peer that has the deployment. Guests never
 * queue: they only take a slot that is idle now. Null: nowhere. `offers` is only asked for when
 * the local replica has no free slot (the common case costs no scan).
 */
export function localOrPeer<Local, Offer extends SlotOffer>(
  local: Local | null,
  localSlots: number,
  offers: () => Iterable<Offer>,
  mayQueue: boolean,
): LocalOrPeer<Local, Offer> | null {
  if (local && localSlots > 0) return { kind: 'local', local };
  let best: Offer | null = null;
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
