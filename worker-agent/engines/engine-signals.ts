/**
 * What an engine knows about its own load, sent on every heartbeat (`Heartbeat.engine_signals`)
 * so the control plane can route by it: requests running and waiting in the engine, how full
 * its KV cache is, and how much of the prompts its prefix cache served. vLLM and SGLang publish
 * them on their Prometheus /metrics (prometheus-signals.ts); the built-in engines report them
 * from their own state.
 */
import type { HeartbeatEngineSignals } from '../../proto/worker/v1/index';

export interface EngineSignals {
  /** Requests in the engine's running batch. */
  readonly running: number;
  /** Requests waiting in the engine's own queue (the agent's queue is `Heartbeat.queued`). */
  readonly waiting: number;
  /** Fraction of the KV cache in use, 0–1. */
  readonly kvCacheUsage: number;
  /**
   * Prompt tokens served from the prefix cache over the last interval, 0–1; null when the
   * engine gave none yet (no prompt since it started, or it publishes no prefix-cache metrics).
   */
  readonly prefixCacheHitRate: number | null;
}

/** An engine that reports nothing, or can report nothing now (metrics off or unreachable, still loading). */
export type EngineSignalsRead = EngineSignals | null;

/**
 * `Engine.signals()`: a value when the engine answers from its own state (cheap, read often);
 * a promise when it has to fetch them (an HTTP engine's /metrics: read once per heartbeat).
 */
export type EngineSignalsAnswer = EngineSignalsRead | Promise<EngineSignalsRead>;

/** Past this KV-cache use the engine starts to preempt or refuse: crossing it either way is worth an early heartbeat. */
export const KV_CACHE_PRESSURE = 0.9;

/**
 * Whether `next` differs from `previous` in a way the control plane should hear before the
 * next heartbeat: requests start to wait in the engine, or the KV cache crosses
 * KV_CACHE_PRESSURE (up or down).
 */
export function crossesThreshold(previous: EngineSignalsRead, next: EngineSignalsRead): boolean {
  if (!next) return false;
  if ((previous?.waiting ?? 0) === 0 && next.waiting > 0) return true;
  return (previous?.kvCacheUsage ?? 0) >= KV_CACHE_PRESSURE !== next.kvCacheUsage >= KV_CACHE_PRESSURE;
}

/** The heartbeat's `engine_signals`, or undefined to leave it unset (the engine reports none). */
export function engineSignalsFrame(signals: EngineSignalsRead): HeartbeatEngineSignals | undefined {
  if (!signals) return undefined;
  const hitRate = signals.prefixCacheHitRate;
  return {
    running: wholeCount(signals.running),
    waiting: wholeCount(signals.waiting),
    kvCacheUsage: ratio(signals.kvCacheUsage),
    prefixCacheHitRate: hitRate === null ? 0 : ratio(hitRate),
    prefixCacheHitRateKnown: hitRate !== null && Number.isFinite(hitRate),
  };
}

/** A count that fits `uint32`: non-finite or negative values become 0. */
export function wholeCount(value: number): number {
  return Number.isFinite(value) && value > 0 ? Math.min(0xffff_ffff, Math.round(value)) : 0;
}

/** A ratio clamped to 0–1 (NaN becomes 0). */
export function ratio(value: number): number {
  return Number.isFinite(value) ? Math.min(1, Math.max(0, value)) : 0;
}

export function isSignalsPromise(answer: EngineSignalsAnswer | undefined): answer is Promise<EngineSignalsRead> {
  return typeof (answer as Promise<EngineSignalsRead> | null | undefined)?.then === 'function';
}
