/**
 * What a replica must be to be a candidate at all. Structural types, not `AgentConnection`:
 * placement is core and knows no connection, and tests pass plain objects.
 */

/** A replica as the filters read it. */
export interface ReplicaState {
  /** Its agent is leaving: it finishes what it runs and takes nothing new. */
  readonly draining: boolean;
  readonly closed: boolean;
}

export interface GuestReplicaState extends ReplicaState {
  /** Its engine puts owners' waiting jobs ahead of guests' (docs/shared-serving.md): without it a replica takes no guest. */
  readonly priorityScheduling: boolean;
}

/** Ready: connected and not draining. */
export function takesWork(replica: ReplicaState): boolean {
  return !replica.draining && !replica.closed;
}

/** Ready, and its engine can keep guests behind its owner. */
export function takesGuests(replica: GuestReplicaState): boolean {
  return replica.priorityScheduling && takesWork(replica);
}
