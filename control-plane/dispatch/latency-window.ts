/** What one replica's jobs took between two of its agent's heartbeats (the console's latency over time). */
export interface LatencyReport {
  /** Mean time from dispatch to the job's first chunk or output, over the jobs that produced one in the interval; null when none did. */
  firstOutputMs: number | null;
  /** Mean time from dispatch to completion of the jobs that completed in the interval; null when none did. */
  completionMs: number | null;
  /** Jobs that completed in the interval. */
  completed: number;
}

/**
 * Sums since the last report, so each heartbeat reports the interval it closes: constant memory
 * and two additions per job, on the path of every chunk's first arrival.
 */
export class LatencyWindow {
  private firstOutputSum = 0;
  private firstOutputs = 0;
  private completionSum = 0;
  private completions = 0;

  firstOutput(ms: number): void {
    this.firstOutputSum += ms;
    this.firstOutputs++;
  }

  completed(ms: number): void {
    this.completionSum += ms;
    this.completions++;
  }

  /** The interval's figures, and a new interval begins. */
  take(): LatencyReport {
    const report = {
      firstOutputMs: this.firstOutputs ? round(this.firstOutputSum / this.firstOutputs) : null,
      completionMs: this.completions ? round(this.completionSum / this.completions) : null,
      completed: this.completions,
    };
    this.firstOutputSum = this.firstOutputs = this.completionSum = this.completions = 0;
    return report;
  }
}

function round(ms: number): number {
  return Math.round(ms * 10) / 10;
}
