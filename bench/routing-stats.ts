/** What one policy's run of the routing benchmark measured, and the server metrics it reads. */
import { percentile } from './paced-client';
import type { ReplaySample } from './routing-client';

export interface RunStats {
  /** Requests scheduled in the measured window (after the warm-up). */
  readonly sent: number;
  /** Answered 200 to the end. */
  readonly completed: number;
  /** Non-200 answers and connection errors (not counting the benchmark's own cut). */
  readonly failed: number;
  /** Still running at the cut-off (the grace after the last send) and aborted by the benchmark. */
  readonly cut: number;
  readonly errors: Record<string, number>;
  /**
   * Time to the first content chunk from the scheduled send time. A request cut before its first
   * token counts with the time it had waited (a lower bound), so a backlog is not hidden.
   */
  readonly ttftMs: { readonly p50: number; readonly p90: number; readonly p99: number; readonly count: number; readonly censored: number };
  /** Completion tokens of requests that finished inside the measured window, per second of it. */
  readonly outputTokensPerSecond: number;
  readonly completionTokens: number;
  /** Sum of cached_tokens / sum of prompt_tokens over the completed requests. */
  readonly cacheHitRatio: number;
  readonly promptTokens: number;
  readonly cachedTokens: number;
  readonly clientSendLagP99Ms: number;
  readonly windowSeconds: number;
}

export function runStats(samples: readonly ReplaySample[], warmupMs: number, sendEndMs: number): RunStats {
  const measured = samples.filter((sample) => sample.scheduledAt >= warmupMs && sample.scheduledAt < sendEndMs);
  const completed = measured.filter((sample) => sample.status === 200 && !sample.cut);
  const failed = measured.filter((sample) => !sample.cut && sample.status !== 200);
  const cut = measured.filter((sample) => sample.cut);
  const errors: Record<string, number> = {};
  for (const sample of failed) {
    const key = `${sample.status} ${sample.error ?? ''}`.trim();
    errors[key] = (errors[key] ?? 0) + 1;
  }
  const ttfts: number[] = [];
  let censored = 0;
  for (const sample of measured) {
    if (sample.firstTokenAt !== null && (sample.status === 200 || sample.cut)) ttfts.push(sample.firstTokenAt - sample.scheduledAt);
    else if (sample.cut) {
      ttfts.push(sample.endedAt! - sample.scheduledAt);
      censored++;
    }
  }
  ttfts.sort((a, b) => a - b);
  const windowSeconds = (sendEndMs - warmupMs) / 1000;
  const finishedInWindow = samples.filter((sample) => sample.status === 200 && !sample.cut && sample.endedAt! >= warmupMs && sample.endedAt! <= sendEndMs);
  const completionTokens = finishedInWindow.reduce((sum, sample) => sum + sample.completionTokens, 0);
  const promptTokens = completed.reduce((sum, sample) => sum + sample.promptTokens, 0);
  const cachedTokens = completed.reduce((sum, sample) => sum + sample.cachedTokens, 0);
  const lags = measured.map((sample) => sample.sendLagMs).sort((a, b) => a - b);
  return {
    sent: measured.length, completed: completed.length, failed: failed.length, cut: cut.length, errors,
    ttftMs: { p50: round(percentile(ttfts, 0.5)), p90: round(percentile(ttfts, 0.9)), p99: round(percentile(ttfts, 0.99)), count: ttfts.length, censored },
    outputTokensPerSecond: round(completionTokens / windowSeconds), completionTokens,
    cacheHitRatio: promptTokens ? round(cachedTokens / promptTokens, 4) : 0, promptTokens, cachedTokens,
    clientSendLagP99Ms: round(percentile(lags, 0.99)), windowSeconds: round(windowSeconds),
  };
}

export function round(value: number, digits = 1): number {
  const scale = 10 ** digits;
  return Math.round(value * scale) / scale;
}

/** Prometheus text → sample name with labels → value. */
export function parseMetrics(text: string): Map<string, number> {
  const values = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const space = line.lastIndexOf(' ');
    values.set(line.slice(0, space), Number(line.slice(space + 1)));
  }
  return values;
}

export async function scrape(baseUrl: string): Promise<Map<string, number>> {
  const response = await fetch(`${baseUrl}/metrics`);
  return parseMetrics(await response.text());
}

const DECISION = /^inference_routing_decisions_total\{(.*)\}$/;

function labelsOf(text: string): Record<string, string> {
  const labels: Record<string, string> = {};
  for (const match of text.matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) labels[match[1]] = match[2];
  return labels;
}

/** Routing decisions of `deployment` by `policy:reason`, summed over servers, `after` minus `before`. */
export function routingDecisions(before: readonly Map<string, number>[], after: readonly Map<string, number>[], deployment: string): Record<string, number> {
  const totals: Record<string, number> = {};
  const add = (snapshot: Map<string, number>, sign: number) => {
    for (const [name, value] of snapshot) {
      const match = DECISION.exec(name);
      if (!match) continue;
      const labels = labelsOf(match[1]);
      if (labels.deployment !== deployment) continue;
      const key = `${labels.policy}:${labels.reason}`;
      totals[key] = (totals[key] ?? 0) + sign * value;
    }
  };
  for (const snapshot of after) add(snapshot, 1);
  for (const snapshot of before) add(snapshot, -1);
  for (const key of Object.keys(totals)) if (totals[key] === 0) delete totals[key];
  return totals;
}

/** Jobs of `deployment` running on or queued for a server's agents, from its /metrics. */
export function outstandingJobs(snapshot: Map<string, number>, deployment: string): number {
  let total = 0;
  for (const [name, value] of snapshot) {
    if (!name.startsWith('inference_in_flight{') && !name.startsWith('inference_queue_depth{')) continue;
    if (labelsOf(name).deployment === deployment) total += value;
  }
  return total;
}
