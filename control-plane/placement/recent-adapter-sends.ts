/**
 * Which adapters this server sent to which replica in the last few seconds: a replica's
 * heartbeat (and a peer's registry row after it) tells of a load up to a couple of seconds
 * after the job that started it, and until then the next job for that adapter should count it
 * as loading there, not as a miss that loads it on another replica too. Bounded (oldest first
 * out), so a flood of distinct adapters costs a fixed memory.
 */
export class RecentAdapterSends {
  private readonly sentAt = new Map<string, number>();

  constructor(
    /** How long a send counts as a load under way. @default 3000 */
    private readonly windowMs = 3_000,
    private readonly capacity = 10_000,
  ) {}

  sent(replicaId: string, adapter: string, now: number): void {
    const entry = `${replicaId}\u0000${adapter}`;
    this.sentAt.delete(entry);
    this.sentAt.set(entry, now);
    if (this.sentAt.size > this.capacity) this.sentAt.delete(this.sentAt.keys().next().value!);
  }

  /** This server sent the adapter there within the window. */
  pending(replicaId: string, adapter: string, now: number): boolean {
    const at = this.sentAt.get(`${replicaId}\u0000${adapter}`);
    return at !== undefined && now - at < this.windowMs;
  }
}
