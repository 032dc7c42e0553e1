/**
 * How many lines of batches one deployment runs at once on one server, by additive increase and
 * multiplicative decrease on its live traffic: one more for each line that finished while no
 * live request was kept waiting, half as many when one was (a live job queued behind busy
 * slots, or a replica full while it serves live jobs: the next live request would wait). A
 * decrease counts once per round (the lines in flight when it happened must finish before the
 * next one), so one burst does not collapse the window to nothing. Free slots still bound what
 * starts (batch-runner.ts): the window only keeps lines from taking every slot that live traffic
 * is about to want.
 */
export class BatchWindow {
  private size: number;
  /** Lines that must still finish before a new decrease counts (the round of the last one). */
  private roundLeft = 0;

  constructor(
    /** Lines at first (one per replica here is a cautious start). */
    initial: number,
    private readonly minimum = 1,
  ) {
    this.size = Math.max(minimum, initial);
  }

  /** Lines that may run now (a whole number). */
  get limit(): number {
    return Math.floor(this.size);
  }

  /**
   * A line finished; `congested`: live requests waited meanwhile. `inFlight`: lines still
   * running, which start the round of a decrease. `ceiling`: the slots of the deployment's
   * replicas here (the window never grows past what could run).
   */
  finished(congested: boolean, inFlight: number, ceiling: number): void {
    if (this.roundLeft > 0) this.roundLeft--;
    if (congested) {
      this.decrease(inFlight);
      return;
    }
    this.size = Math.min(Math.max(this.minimum, ceiling), this.size + 1);
  }

  /** Live requests wait now (seen before starting more lines). */
  congested(inFlight: number): void {
    this.decrease(inFlight);
  }

  private decrease(inFlight: number): void {
    if (this.roundLeft > 0) return;
    this.size = Math.max(this.minimum, this.size / 2);
    this.roundLeft = inFlight;
  }
}
