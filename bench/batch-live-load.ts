/**
 * The batch benchmark's clients, on the official `openai` SDK: an open-loop live load of
 * streamed chat completions (time to first content chunk per request), and a watcher that
 * polls a batch (`batches.retrieve`) and the server's `/metrics` (jobs in flight by class) once
 * a second, so a run's batch throughput and slot occupancy can be read over any window.
 */
import OpenAI from 'openai';
import { percentile } from './paced-client';
import { round, scrape } from './routing-stats';
import { seededRandom } from '../common/seeded-random';

export interface LiveSample {
  /** Milliseconds from the start of the run, as scheduled (open loop: whether or not the client kept up). */
  readonly scheduledAt: number;
  /** How late the client actually sent it (event-loop delay of this process). */
  sendLagMs: number;
  firstTokenAt: number | null;
  endedAt: number | null;
  status: number;
  completionTokens: number;
  error?: string;
  /** Still running at the cut-off and aborted by the benchmark. */
  cut: boolean;
}

export interface LiveLoadOptions {
  readonly client: OpenAI;
  readonly model: string;
  readonly maxTokens: number;
  /** Requests per second. */
  readonly rate: number;
  readonly seconds: number;
  readonly arrivals: 'poisson' | 'fixed';
  readonly seed: number;
  /** After the last send, requests still running are aborted after this long. */
  readonly graceMs: number;
  readonly progress?: (samples: readonly LiveSample[], elapsedMs: number) => void;
  readonly aborted?: () => boolean;
}

/** Send times in ms from the start: Poisson arrivals (seeded, so every run replays the same ones) or a fixed interval. */
export function arrivalTimes(rate: number, seconds: number, arrivals: 'poisson' | 'fixed', seed: number): number[] {
  const times: number[] = [];
  const random = seededRandom(seed);
  for (let at = 0; ;) {
    at += arrivals === 'fixed' ? 1000 / rate : (-Math.log(1 - random()) * 1000) / rate;
    if (at >= seconds * 1000) return times;
    times.push(at);
  }
}

/** A prompt of ~20 words that differs per request (the CPU engine's text follows the prompt). */
export function promptFor(tag: string, index: number): string {
  return `Request ${tag} ${index}: write a short note about serving models on idle capacity, in plain words, for an operator.`;
}

/** Runs the live load, times in ms from `startedAt` (a `performance.now()`); resolves when every request has ended or been cut. */
export async function liveLoad(options: LiveLoadOptions, tag: string, startedAt = performance.now()): Promise<{ samples: LiveSample[]; sendEndMs: number; startedAt: number }> {
  const times = arrivalTimes(options.rate, options.seconds, options.arrivals, options.seed);
  const samples: LiveSample[] = [];
  const controllers = new Set<AbortController>();
  const running = new Set<Promise<void>>();
  const elapsed = () => performance.now() - startedAt;
  let progressTimer: NodeJS.Timeout | undefined;
  if (options.progress) progressTimer = setInterval(() => options.progress!(samples, elapsed()), 10_000);

  const send = (index: number, scheduledAt: number) => {
    const sample: LiveSample = { scheduledAt, sendLagMs: round(elapsed() - scheduledAt, 2), firstTokenAt: null, endedAt: null, status: 0, completionTokens: 0, cut: false };
    samples.push(sample);
    const controller = new AbortController();
    controllers.add(controller);
    const task = (async () => {
      try {
        const stream = await options.client.chat.completions.create({
          model: options.model, messages: [{ role: 'user', content: promptFor(tag, index) }], max_tokens: options.maxTokens,
          stream: true, stream_options: { include_usage: true },
        }, { signal: controller.signal });
        for await (const chunk of stream) {
          if (sample.firstTokenAt === null && chunk.choices[0]?.delta?.content) sample.firstTokenAt = elapsed();
          if (chunk.usage) sample.completionTokens = chunk.usage.completion_tokens;
        }
        sample.status = 200;
      } catch (error) {
        if (controller.signal.aborted) sample.cut = true;
        else if (error instanceof OpenAI.APIError) {
          sample.status = error.status ?? 0;
          sample.error = (error.code ?? error.message ?? '').toString().slice(0, 120);
        } else sample.error = (error as Error).message.slice(0, 120);
      } finally {
        sample.endedAt = elapsed();
        controllers.delete(controller);
      }
    })();
    running.add(task);
    void task.finally(() => running.delete(task));
  };

  for (let index = 0; index < times.length; index++) {
    if (options.aborted?.()) break;
    const wait = times[index] - elapsed();
    if (wait > 1) await new Promise((resolve) => setTimeout(resolve, wait));
    send(index, times[index]);
  }
  const sendEndMs = options.seconds * 1000;
  const graceEnd = Date.now() + options.graceMs;
  while (running.size && Date.now() < graceEnd && !options.aborted?.()) await Promise.race([Promise.race(running), new Promise((resolve) => setTimeout(resolve, 250))]);
  for (const controller of controllers) controller.abort();
  await Promise.allSettled([...running]);
  if (progressTimer) clearInterval(progressTimer);
  return { samples, sendEndMs, startedAt };
}

export interface LiveStats {
  /** Scheduled inside the measured window. */
  readonly sent: number;
  readonly completed: number;
  readonly failed: number;
  readonly cut: number;
  readonly errors: Record<string, number>;
  /** Scheduled send → first content chunk, of requests scheduled in the window (a request cut before its first token counts with its wait so far). */
  readonly ttftMs: { readonly p50: number; readonly p90: number; readonly p99: number; readonly max: number; readonly mean: number; readonly count: number; readonly censored: number };
  /** Completion tokens of live requests that finished inside the window, per second of it. */
  readonly outputTokensPerSecond: number;
  readonly completionTokens: number;
  readonly sendLagP99Ms: number;
  readonly windowSeconds: number;
}

export function ttftsOf(samples: readonly LiveSample[], fromMs: number, toMs: number): { values: number[]; censored: number } {
  const values: number[] = [];
  let censored = 0;
  for (const sample of samples) {
    if (sample.scheduledAt < fromMs || sample.scheduledAt >= toMs) continue;
    if (sample.firstTokenAt !== null && (sample.status === 200 || sample.cut)) values.push(sample.firstTokenAt - sample.scheduledAt);
    else if (sample.cut) {
      values.push(sample.endedAt! - sample.scheduledAt);
      censored++;
    }
  }
  return { values: values.sort((a, b) => a - b), censored };
}

export function ttftSummary(values: readonly number[], censored: number): LiveStats['ttftMs'] {
  const sorted = [...values].sort((a, b) => a - b);
  return {
    p50: round(percentile(sorted, 0.5)), p90: round(percentile(sorted, 0.9)), p99: round(percentile(sorted, 0.99)), max: round(sorted.at(-1) ?? NaN),
    mean: round(sorted.reduce((sum, value) => sum + value, 0) / Math.max(1, sorted.length)), count: sorted.length, censored,
  };
}

/** Statistics of the requests scheduled in [fromMs, toMs) (the measured window of a run). */
export function liveStats(samples: readonly LiveSample[], fromMs: number, toMs: number): LiveStats {
  const measured = samples.filter((sample) => sample.scheduledAt >= fromMs && sample.scheduledAt < toMs);
  const failed = measured.filter((sample) => !sample.cut && sample.status !== 200);
  const errors: Record<string, number> = {};
  for (const sample of failed) {
    const key = `${sample.status} ${sample.error ?? ''}`.trim();
    errors[key] = (errors[key] ?? 0) + 1;
  }
  const { values, censored } = ttftsOf(samples, fromMs, toMs);
  const windowSeconds = (toMs - fromMs) / 1000;
  const completionTokens = samples.filter((sample) => sample.status === 200 && !sample.cut && sample.endedAt! >= fromMs && sample.endedAt! <= toMs)
    .reduce((sum, sample) => sum + sample.completionTokens, 0);
  const lags = measured.map((sample) => sample.sendLagMs).sort((a, b) => a - b);
  return {
    sent: measured.length, completed: measured.filter((sample) => sample.status === 200 && !sample.cut).length, failed: failed.length,
    cut: measured.filter((sample) => sample.cut).length, errors, ttftMs: ttftSummary(values, censored),
    outputTokensPerSecond: round(completionTokens / windowSeconds), completionTokens, sendLagP99Ms: round(percentile(lags, 0.99)), windowSeconds: round(windowSeconds),
  };
}

// ---------------------------------------------------------------------------------------------
// The watcher: a batch's counts and the deployment's jobs in flight, once per interval.

export interface WatchSample {
  /** Milliseconds from the watcher's origin (the run's start). */
  readonly at: number;
  readonly status?: string;
  readonly completed?: number;
  readonly failed?: number;
  readonly outputTokens?: number;
  /** Jobs of the deployment running on the server's agents, by class (`inference_in_flight`). */
  readonly inFlight: Record<string, number>;
  /** `inference_queue_depth` of the deployment. */
  readonly queued: number;
}

const IN_FLIGHT = /^inference_in_flight\{(.*)\}$/;
const QUEUE_DEPTH = /^inference_queue_depth\{(.*)\}$/;

function labelsOf(text: string): Record<string, string> {
  const labels: Record<string, string> = {};
  for (const match of text.matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) labels[match[1]] = match[2];
  return labels;
}

/** Jobs in flight by class, and the queue depth, of one deployment from a /metrics snapshot. */
export function deploymentLoad(snapshot: Map<string, number>, deploymentId: string): { inFlight: Record<string, number>; queued: number } {
  const inFlight: Record<string, number> = {};
  let queued = 0;
  for (const [name, value] of snapshot) {
    const flight = IN_FLIGHT.exec(name);
    if (flight) {
      const labels = labelsOf(flight[1]);
      if (labels.deployment === deploymentId) inFlight[labels.class ?? 'unknown'] = (inFlight[labels.class ?? 'unknown'] ?? 0) + value;
      continue;
    }
    const depth = QUEUE_DEPTH.exec(name);
    if (depth && labelsOf(depth[1]).deployment === deploymentId) queued += value;
  }
  return { inFlight, queued };
}

export class Watcher {
  readonly samples: WatchSample[] = [];
  private timer: NodeJS.Timeout | undefined;
  private busy = false;
  batchId: string | null = null;
  /** Calls that failed (a slow answer is skipped, not queued). */
  errors = 0;
  lastError = '';

  constructor(private readonly client: OpenAI, private readonly baseUrl: string, private readonly deploymentId: string, private readonly origin: number, private readonly intervalMs: number) {}

  start(): void {
    void this.tick();
    this.timer = setInterval(() => void this.tick(), this.intervalMs);
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    while (this.busy) await new Promise((resolve) => setTimeout(resolve, 20));
  }

  /** The batch's most recent reading. */
  last(): WatchSample | undefined {
    for (let index = this.samples.length - 1; index >= 0; index--) if (this.samples[index].status !== undefined) return this.samples[index];
    return undefined;
  }

  async tick(): Promise<WatchSample | undefined> {
    if (this.busy) return undefined;
    this.busy = true;
    try {
      const [batch, snapshot] = await Promise.all([
        this.batchId ? this.client.batches.retrieve(this.batchId) : Promise.resolve(null),
        scrape(this.baseUrl),
      ]);
      // The time the answers were read (both calls are a few ms): counts are as of then.
      const at = performance.now() - this.origin;
      const sample: WatchSample = {
        at: round(at, 1),
        ...(batch ? { status: batch.status, completed: batch.request_counts?.completed ?? 0, failed: batch.request_counts?.failed ?? 0, outputTokens: batch.usage?.output_tokens ?? 0 } : {}),
        ...deploymentLoad(snapshot, this.deploymentId),
      };
      this.samples.push(sample);
      return sample;
    } catch (error) {
      this.errors++;
      this.lastError = (error as Error).message;
      return undefined;
    } finally {
      this.busy = false;
    }
  }
}

/** A batch counter at time `at`, linearly between the readings around it. */
export function counterAt(samples: readonly WatchSample[], pick: (sample: WatchSample) => number | undefined, at: number): number {
  const readings = samples.filter((sample) => pick(sample) !== undefined);
  if (!readings.length) return NaN;
  if (at <= readings[0].at) return pick(readings[0])!;
  for (let index = 1; index < readings.length; index++) {
    const before = readings[index - 1];
    const after = readings[index];
    if (at <= after.at) {
      const fraction = (at - before.at) / Math.max(1e-9, after.at - before.at);
      return pick(before)! + fraction * (pick(after)! - pick(before)!);
    }
  }
  return pick(readings.at(-1)!)!;
}

/** Mean jobs in flight per class over the samples inside [fromMs, toMs]. */
export function meanInFlight(samples: readonly WatchSample[], fromMs: number, toMs: number): { byClass: Record<string, number>; queued: number; count: number } {
  const inside = samples.filter((sample) => sample.at >= fromMs && sample.at <= toMs);
  const byClass: Record<string, number> = {};
  for (const sample of inside) for (const [name, value] of Object.entries(sample.inFlight)) byClass[name] = (byClass[name] ?? 0) + value;
  for (const name of Object.keys(byClass)) byClass[name] = round(byClass[name] / Math.max(1, inside.length), 2);
  return { byClass, queued: round(inside.reduce((sum, sample) => sum + sample.queued, 0) / Math.max(1, inside.length), 2), count: inside.length };
}
