import type { GuestReplicaState } from './filters';
import { takesGuests } from './filters';
import { pickBest } from './pick';

/** A replica's slots as this server counts them now (`AgentConnection`'s getters). */
export interface SlotReplica {
  /** Slots neither running a job nor reserved; 0 on a draining or closed replica. */
  readonly freeSlots: number;
}

const freeSlots = (replica: SlotReplica): number => replica.freeSlots;

/**
 * The replica with the most free slots, or null when none has one (ties: the first). Where work
 * that must start now, never queue, goes: a media job claimed from the queue, a batch line.
 */
export function mostFree<R extends SlotReplica>(replicas: readonly R[]): R | null {
  return pickBest(replicas, freeSlots);
}

/** The sharing settings that bound guests on one replica (sharing/sharing-config.ts). */
export interface GuestRules {
  /** Share of a replica's slots (at least one) kept free for its owner's next requests. */
  readonly ownerHeadroomFraction: number;
  readonly maxGuestsPerReplica: number;
}

export interface GuestSlotReplica extends GuestReplicaState {
  readonly maxConcurrency: number;
  readonly inFlight: number;
  readonly batchInFlight: number;
  readonly guestInFlight: number;
  readonly reserved: number;
}

/**
 * Idle slots a guest may take on this replica now: those its owner leaves idle beyond the
 * headroom, up to the guest bound. Slots running batch lines count as idle: batches rank below
 * guests, so a guest admitted there waits (in the agent's guest queue, ahead of any batch line)
 * for at most the one line running in that slot, and no new line starts while it waits
 * (control-plane/batches/batch-runner.ts).
 */
export function guestSlotsOn(replica: GuestSlotReplica, rules: GuestRules): number {
  if (!takesGuests(replica)) return 0;
  const headroom = Math.max(1, Math.ceil(replica.maxConcurrency * rules.ownerHeadroomFraction));
  const idle = replica.maxConcurrency - (replica.inFlight - replica.batchInFlight) - replica.reserved - headroom;
  return Math.max(0, Math.min(idle, rules.maxGuestsPerReplica - replica.guestInFlight));
}
