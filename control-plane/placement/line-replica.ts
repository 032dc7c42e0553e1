import { takesWork, type ReplicaState } from './filters';
import { mostFree, type SlotReplica } from './slots';

/**
 * Where a running batch line's next job goes: its first on the slot reserved for it when the
 * line was claimed (batch-runner.ts), while that replica takes work; a later one (an embeddings
 * line's fan-out) on the replica with the most free slots, else back on the reserved one while
 * it takes work (it waits there behind the line's own jobs). Null: nowhere. A line never waits
 * in a live queue for a slot, so no other replica is a candidate. `replicas` is only asked for
 * when the reserved slot does not decide.
 */
export function lineReplica<R extends ReplicaState & SlotReplica>(reserved: R, first: boolean, replicas: () => readonly R[]): R | null {
  if (first && takesWork(reserved)) return reserved;
  return mostFree(replicas()) ?? (takesWork(reserved) ? reserved : null);
}
