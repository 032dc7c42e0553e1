/**
 * Which application prefixes this server recently sent to which replica: only to tell a
 * `prefix_hit` (its engine should hold the prefix) from a `prefix_cold` in the routing
 * metrics. Bounded (oldest first out), so a flood of distinct prompts costs a fixed memory.
 */
export class RecentPrefixes {
  private readonly entries = new Map<string, true>();

  constructor(private readonly capacity = 10_000) {}

  /** Records that `replicaId` got a prompt of `application`; true when it had one before. */
  sent(replicaId: string, application: number): boolean {
    const entry = `${replicaId}\u0000${application}`;
    const seen = this.entries.delete(entry);
    this.entries.set(entry, true);
    if (this.entries.size > this.capacity) this.entries.delete(this.entries.keys().next().value!);
    return seen;
  }
}
