import { takesWork, type ReplicaState } from './filters';
import { mostFree, type SlotReplica } from './slots';

/** A replica's adapter slots (`Hello.max_loras`); absent or 0: it serves no adapter. */
export interface AdapterSlotReplica {
  readonly maxLoras?: number;
}

const servesAdapters = (replica: AdapterSlotReplica): boolean => (replica.maxLoras ?? 0) > 0;

/**
 * Where a running batch line's next job goes: its first on the slot reserved for it when the
 * line was claimed (batch-runner.ts), while that replica takes work; a later one (an embeddings
 * line's fan-out) on the replica with the most free slots, else back on the reserved one while
 * it takes work (it waits there behind the line's own jobs). Null: nowhere. A line never waits
 * in a live queue for a slot, so no other replica is a candidate. `replicas` is only asked for
 * when the reserved slot does not decide.
 *
 * A line addressed to a LoRA adapter (`needsAdapterSlots`) runs only on a replica with adapter
 * slots: the slot was reserved before the line (and its adapter) was known, so a reserved
 * replica without them is passed over for the one with adapter slots and the most free slots,
 * else one with adapter slots that takes work (the job waits there); null when none has them.
 */
export function lineReplica<R extends ReplicaState & SlotReplica & AdapterSlotReplica>(reserved: R, first: boolean, replicas: () => readonly R[], needsAdapterSlots = false): R | null {
  if (!needsAdapterSlots) {
    if (first && takesWork(reserved)) return reserved;
    return mostFree(replicas()) ?? (takesWork(reserved) ? reserved : null);
  }
  const reservedServes = takesWork(reserved) && servesAdapters(reserved);
  if (first && reservedServes) return reserved;
  const serving = replicas().filter((replica) => servesAdapters(replica) && takesWork(replica));
  return mostFree(serving) ?? (reservedServes ? reserved : serving[0] ?? null);
}
