import type { HeartbeatEngineSignals } from '../../proto/worker/v1';

/** A replica's engine signals as the control plane shows them (GraphQL replicaLoad, /metrics). */
export interface EngineLoad {
  engineRunning: number | null;
  engineWaiting: number | null;
  /** 0–1, rounded to 4 decimals (the wire carries float32). */
  kvCacheUsage: number | null;
  /** 0–1 over the agent's last interval, rounded to 4 decimals; null until the engine gave one. */
  prefixCacheHitRate: number | null;
}

const UNKNOWN: EngineLoad = Object.freeze({ engineRunning: null, engineWaiting: null, kvCacheUsage: null, prefixCacheHitRate: null });

/** `Heartbeat.engine_signals` in the control plane's terms: all null when absent (an engine that reports none, an older agent). */
export function engineLoadOf(signals: HeartbeatEngineSignals | null | undefined): EngineLoad {
  if (!signals) return UNKNOWN;
  return {
    engineRunning: signals.running,
    engineWaiting: signals.waiting,
    kvCacheUsage: ratio(signals.kvCacheUsage),
    prefixCacheHitRate: signals.prefixCacheHitRateKnown ? ratio(signals.prefixCacheHitRate) : null,
  };
}

function ratio(value: number): number {
  return Number.isFinite(value) ? Math.round(Math.min(1, Math.max(0, value)) * 10_000) / 10_000 : 0;
}
