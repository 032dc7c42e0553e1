/**
 * bench:shared's vocabulary: its options, one request's sample, what a phase measured and the
 * statistics drawn from samples (run-shared.ts runs the phases; report.ts writes them up).
 */
import { percentile } from '../paced-client';
import { round3 } from './measure';
import type { cpuBetween, serverLag } from './phase-snapshot';

export const MODEL = 'meta-llama/Llama-3.1-8B-Instruct';
export const SHARED_ID = `shared/${MODEL}`;

export interface Options {
  seconds: number; warmup: number; reps: number; replicas: number; slots: number; ttftMs: number; tokensPerSecond: number;
  maxTokens: number; ownerConcurrency: number; ownerThinkMs: number; guestMultiplier: number; guestBackoffMs: number; headroomFraction: number; maxGuestsPerReplica: number;
  heavyMultiplier: number; guestNice: number; maxOtherCores: number; redo: number; fairSmallPerSecond: number; fairRatio: number; phases: Phase[];
}

export interface Sample {
  readonly startedAt: number;
  /** First SSE chunk with non-empty content (the role chunk before it does not count). */
  readonly firstTokenAt: number | null;
  readonly endedAt: number;
  readonly status: number;
  readonly tokens: number;
  readonly error?: string;
  /** Which guest workspace sent it (the fairness phase has two). */
  readonly who?: string;
}

export interface LoadStats {
  started: number;
  succeeded: number;
  refused429: number;
  /** Refused for credit (the fairness and flood phases' guests have plenty: expected 0). */
  refused402: number;
  failed: number;
  errors: Record<string, number>;
  requestsPerSecond: number;
  tokensPerSecond: number;
  attemptsPerSecond: number;
  ttftMs: { p50: number; p90: number; p99: number; max: number; count: number };
  latencyMs: { p50: number; p99: number };
}

/** Latency of requests started in [from, to); throughput of those that ended in it. */
export function loadStats(samples: readonly Sample[], from: number, to: number): LoadStats {
  const seconds = (to - from) / 1000;
  const startedIn = samples.filter((sample) => sample.startedAt >= from && sample.startedAt < to);
  const endedIn = samples.filter((sample) => sample.endedAt >= from && sample.endedAt < to);
  const ok = endedIn.filter((sample) => sample.status === 200);
  const ttft = startedIn.filter((sample) => sample.status === 200 && sample.firstTokenAt !== null).map((sample) => sample.firstTokenAt! - sample.startedAt).sort((a, b) => a - b);
  const latency = startedIn.filter((sample) => sample.status === 200).map((sample) => sample.endedAt - sample.startedAt).sort((a, b) => a - b);
  const errors: Record<string, number> = {};
  for (const sample of endedIn) if (sample.status !== 200) errors[`${sample.status} ${sample.error ?? ''}`.trim()] = (errors[`${sample.status} ${sample.error ?? ''}`.trim()] ?? 0) + 1;
  return {
    started: startedIn.length, succeeded: ok.length,
    refused429: endedIn.filter((sample) => sample.status === 429).length,
    refused402: endedIn.filter((sample) => sample.status === 402).length,
    failed: endedIn.filter((sample) => sample.status !== 200 && sample.status !== 429 && sample.status !== 402).length,
    errors,
    requestsPerSecond: round3(ok.length / seconds),
    tokensPerSecond: round3(ok.reduce((sum, sample) => sum + sample.tokens, 0) / seconds),
    attemptsPerSecond: round3(endedIn.length / seconds),
    ttftMs: { p50: round3(percentile(ttft, 0.5)), p90: round3(percentile(ttft, 0.9)), p99: round3(percentile(ttft, 0.99)), max: round3(ttft.at(-1) ?? NaN), count: ttft.length },
    latencyMs: { p50: round3(percentile(latency, 0.5)), p99: round3(percentile(latency, 0.99)) },
  };
}

export function ttftsIn(samples: readonly Sample[], from: number, to: number): number[] {
  return samples.filter((sample) => sample.startedAt >= from && sample.startedAt < to && sample.status === 200 && sample.firstTokenAt !== null)
    .map((sample) => round3(sample.firstTokenAt! - sample.startedAt));
}

export type Phase = 'A' | 'B' | 'H' | 'R' | 'N' | 'F';

/** What each phase adds to the owner's load (bench/README.md). */
export const PHASES: Record<Phase, string> = {
  A: 'the owner alone',
  B: 'guests in closed loops (×5 the idle guest slots)',
  H: 'guests at 10× B (×10 the loops)',
  R: 'refusals only: as many loops as H of a guest without credit (every attempt a 402, decided in memory)',
  N: 'the node:http floor: R\'s flood sent to bare node:http answering the same 402 bytes (bench/refusal-floor.ts), the owner on our server as always',
  F: 'fairness: two guest workspaces at 1:10 attempt rates (open loops)',
};

export interface PhaseResult {
  phase: Phase;
  repetition: number;
  idleGuestSlots: { samples: number[]; used: number };
  /** Closed guest loops (B, H), or the two open loops' attempts per second (F). */
  guests: number;
  owner: LoadStats;
  guest: LoadStats | null;
  /** F: each guest workspace's own numbers. */
  byGuest: Record<string, LoadStats> | null;
  /** For pooled percentiles across repetitions. */
  ownerTtfts: number[];
  guestTtfts: number[];
  /** Owner requests of the window: [seconds from the window's start, TTFT ms] (to look for periodic stalls). */
  ownerTimeline: Array<[number, number]>;
  cpu: ReturnType<typeof cpuBetween>;
  /** The server process's own CPU over the window (utime + stime from /proc), µs. */
  serverCpuMicros: number;
  windowSeconds: number;
  serverEventLoopDelay: ReturnType<typeof serverLag>;
  clientEventLoopDelay: { p50Ms: number; p99Ms: number; maxMs: number };
  serverFirstByteMeanMs: { owner: number | null; guest: number | null };
  loadAverage1m: number;
}

/** What the pool should leave guests with the owner load spread evenly over the replicas. */
export function computedIdleSlots(options: Options): number {
  const { replicas, slots, ownerConcurrency, headroomFraction, maxGuestsPerReplica } = options;
  const headroom = Math.max(1, Math.ceil(slots * headroomFraction));
  return replicas * Math.max(0, Math.min(maxGuestsPerReplica, Math.floor(slots - ownerConcurrency / replicas - headroom)));
}
