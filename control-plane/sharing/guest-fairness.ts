/** What the fairness rule knows of one guest workspace's use of one shared model, on this server. */
interface GuestUse {
  /** Guest requests of the workspace running on the model's pool, admitted by this server. */
  inFlight: number;
  /**
   * Its last refusal for want of a slot (the pool's or this rule's), and the last time it was
   * admitted to a slot beyond an even split: while another workspace that wanted one held as
   * many or fewer (the odd slot of an uneven split; ties go to whoever had it least recently).
   * -Infinity: never.
   */
  lastRefusedAt: number;
  lastBonusAt: number;
  /** Its last admission or refusal (for forgetting it). */
  lastSeenAt: number;
}

export interface FairnessOptions {
  /**
   * A workspace refused for want of a slot keeps its claim on the next one this long; one that
   * stopped asking stops holding slots back from the others. @default 1000
   */
  contendWindowMs: number;
  now?: () => number;
}

/**
 * Per-guest fairness of a shared model's idle guest slots: a flooding workspace cannot take
 * every slot from the others, and nothing is held back from it when no other workspace wants
 * one. Max-min fairness without a queue (guests are never queued): an idle slot goes to the
 * workspace that holds the fewest of the model's slots among those that *want* one, so shares
 * even out as slots free up.
 *
 * A workspace W may take an idle slot unless every idle slot is claimed by another workspace V
 * that wants one and outranks it (each such V claims one: with more idle slots than
 * claimants, W takes one of the rest):
 * - V wants more when it was refused for want of a slot (the pool was busy, or this rule)
 *   within the last `contendWindowMs`: it asked for more than it got. A workspace whose
 *   requests are all admitted holds nothing back from anyone, and one that stopped asking
 *   stops holding slots back after the window.
 * - V outranks W when V holds fewer guest slots of the model (`inFlight`), or as many and had
 *   the odd slot of an uneven split less recently (W's last admission beyond an even split is
 *   later than V's): ties take turns, so an odd slot does not always go to the fastest asker.
 *
 * With G guest slots and n workspaces all asking for more than G / n, each ends up holding
 * ⌊G / n⌋ or ⌈G / n⌉ slots, and the odd ones rotate: two guests at 1:10 attempt rates are
 * served about 1:1 (bench/README.md, "fairness"). A lone guest may take every idle slot, as
 * before. Counted per server: each server evens out the guests it admits (a guest calling
 * several servers is counted on each).
 */
export class GuestFairness {
  private readonly models = new Map<string, Map<string, GuestUse>>();
  private readonly now: () => number;
  private pruneAt = 0;

  constructor(private readonly options: FairnessOptions) {
    this.now = options.now ?? Date.now;
  }

  /**
   * Whether `workspaceId` may take one of the model's `idleSlots` idle guest slots now: yes
   * unless every idle slot is claimed by a workspace that wants one and outranks it.
   */
  allows(modelId: string, workspaceId: string, idleSlots = 1): boolean {
    const guests = this.models.get(modelId);
    if (!guests) return idleSlots > 0;
    const me = guests.get(workspaceId);
    const mine = me?.inFlight ?? 0;
    const myLastBonus = me?.lastBonusAt ?? Number.NEGATIVE_INFINITY;
    const recent = this.now() - this.options.contendWindowMs;
    let claimed = 0;
    for (const [id, other] of guests) {
      // Wanting more: refused for want of a slot within the window.
      if (id === workspaceId || other.lastRefusedAt < recent) continue;
      if (other.inFlight < mine || (other.inFlight === mine && other.lastBonusAt < myLastBonus)) {
        if (++claimed >= idleSlots) return false;
      }
    }
    return idleSlots > 0;
  }

  /** Refused for want of a slot: the workspace contends for the next one. */
  refused(modelId: string, workspaceId: string): void {
    const use = this.use(modelId, workspaceId);
    use.lastRefusedAt = this.now();
    use.lastSeenAt = use.lastRefusedAt;
  }

  /** Admitted: it holds one more slot until `finished`. */
  admitted(modelId: string, workspaceId: string): void {
    const use = this.use(modelId, workspaceId);
    const now = this.now();
    const recent = now - this.options.contendWindowMs;
    for (const [id, other] of this.models.get(modelId)!) {
      if (id !== workspaceId && other.lastRefusedAt >= recent && other.inFlight <= use.inFlight) {
        use.lastBonusAt = now;
        break;
      }
    }
    use.inFlight++;
    use.lastSeenAt = now;
  }

  finished(modelId: string, workspaceId: string): void {
    const use = this.models.get(modelId)?.get(workspaceId);
    if (use && use.inFlight > 0) use.inFlight--;
  }

  /** Guest slots `workspaceId` holds on the model's pool (this server's admissions). */
  inFlight(modelId: string, workspaceId: string): number {
    return this.models.get(modelId)?.get(workspaceId)?.inFlight ?? 0;
  }

  private use(modelId: string, workspaceId: string): GuestUse {
    let guests = this.models.get(modelId);
    if (!guests) {
      guests = new Map();
      this.models.set(modelId, guests);
    }
    let use = guests.get(workspaceId);
    if (!use) {
      this.prune();
      use = { inFlight: 0, lastRefusedAt: Number.NEGATIVE_INFINITY, lastBonusAt: Number.NEGATIVE_INFINITY, lastSeenAt: this.now() };
      guests.set(workspaceId, use);
    }
    return use;
  }

  /** Forgets workspaces with nothing in flight that have not asked for a while (at most once per window). */
  private prune(): void {
    const now = this.now();
    if (now < this.pruneAt) return;
    this.pruneAt = now + this.options.contendWindowMs;
    const stale = now - 10 * this.options.contendWindowMs;
    for (const guests of this.models.values()) {
      for (const [id, use] of guests) {
        if (use.inFlight === 0 && use.lastSeenAt < stale) guests.delete(id);
      }
    }
  }
}
