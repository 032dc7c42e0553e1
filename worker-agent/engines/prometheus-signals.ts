/**
 * Engine signals from a Prometheus /metrics page: vLLM's and SGLang's own names, in the
 * Prometheus text format (0.0.4) or OpenMetrics text (`# EOF`, counters typed without their
 * `_total`), which both use through prometheus_client. Only the few samples named below are
 * read; everything else (histograms, process metrics, comments) is skipped line by line, and
 * a page with none of them, or not a metrics page at all, reads as null rather than an error.
 *
 * Names, by engine and version (see test/fixtures/engine-metrics/ for samples):
 * - vLLM (labels `model_name`, and `engine` = data-parallel engine index since V1):
 *   `vllm:num_requests_running`, `vllm:num_requests_waiting`;
 *   KV cache `vllm:kv_cache_usage_perc` (0.9+), before that `vllm:gpu_cache_usage_perc`
 *   (deprecated in 0.9, hidden from 0.11);
 *   prefix cache counters `vllm:prefix_cache_queries_total` / `vllm:prefix_cache_hits_total`
 *   (0.9+), before that `vllm:gpu_prefix_cache_queries_total` / `..._hits_total` (V1 engine,
 *   0.8); the V0 engine published only the gauge `vllm:gpu_prefix_cache_hit_rate`.
 * - SGLang (with `--enable-metrics`; labels `model_name`, `engine_type`, `tp_rank`, `pp_rank`,
 *   `moe_ep_rank`, `dp_rank` with DP attention): `sglang:num_running_reqs`,
 *   `sglang:num_queue_reqs`, `sglang:token_usage` (KV pool use, 0–1), the gauge
 *   `sglang:cache_hit_rate`, and the counters `sglang:cached_tokens_total` /
 *   `sglang:prompt_tokens_total` where the engine has them.
 *
 * Several series of one metric are combined: counts and counters are summed (data-parallel
 * engines, several models), ratios averaged; series that differ only in a tensor / pipeline /
 * expert-parallel rank describe the same scheduler and are counted once.
 */
import { ratio, type EngineSignals } from './engine-signals';

interface MetricNames {
  readonly running: string;
  readonly waiting: string;
  /** Newest name first: a page that still carries a deprecated name beside the new one is read once. */
  readonly kvCacheUsage: readonly string[];
  readonly prefixQueries: readonly string[];
  readonly prefixHits: readonly string[];
  readonly hitRateGauge: readonly string[];
}

const VLLM: MetricNames = {
  running: 'vllm:num_requests_running',
  waiting: 'vllm:num_requests_waiting',
  kvCacheUsage: ['vllm:kv_cache_usage_perc', 'vllm:gpu_cache_usage_perc'],
  prefixQueries: ['vllm:prefix_cache_queries_total', 'vllm:gpu_prefix_cache_queries_total'],
  prefixHits: ['vllm:prefix_cache_hits_total', 'vllm:gpu_prefix_cache_hits_total'],
  hitRateGauge: ['vllm:gpu_prefix_cache_hit_rate'],
};

const SGLANG: MetricNames = {
  running: 'sglang:num_running_reqs',
  waiting: 'sglang:num_queue_reqs',
  kvCacheUsage: ['sglang:token_usage'],
  prefixQueries: ['sglang:prompt_tokens_total'],
  prefixHits: ['sglang:cached_tokens_total'],
  hitRateGauge: ['sglang:cache_hit_rate'],
};

const ENGINES = { vllm: VLLM, sglang: SGLANG } as const;
export type MetricsEngine = keyof typeof ENGINES;

const WANTED = new Set(Object.values(ENGINES).flatMap((names) => [
  names.running, names.waiting, ...names.kvCacheUsage, ...names.prefixQueries, ...names.prefixHits, ...names.hitRateGauge,
]));

/** Labels that name one rank of a single parallel engine: its series repeat one scheduler's numbers. */
const RANK_LABELS = new Set(['tp_rank', 'pp_rank', 'moe_ep_rank', 'attn_tp_rank', 'attn_cp_rank']);

/** One page's numbers, before the hit rate is worked out over an interval. */
export interface EngineMetricsPage {
  readonly engine: MetricsEngine;
  readonly running: number;
  readonly waiting: number;
  readonly kvCacheUsage: number;
  /** Prefix-cache counters (tokens looked up, tokens found), when the engine publishes them. */
  readonly prefixQueries: number | null;
  readonly prefixHits: number | null;
  /** The engine's own hit-rate gauge (vLLM V0, SGLang), when it publishes one. */
  readonly hitRateGauge: number | null;
}

interface Sample {
  readonly labels: Record<string, string>;
  readonly value: number;
}

/** Reads a /metrics page; null when it holds no vLLM or SGLang load metric (or is not a metrics page). */
export function parseEngineMetrics(text: string): EngineMetricsPage | null {
  const samples = readSamples(text);
  for (const engine of Object.keys(ENGINES) as MetricsEngine[]) {
    const names = ENGINES[engine];
    const running = combined(samples, [names.running], 'sum');
    const waiting = combined(samples, [names.waiting], 'sum');
    const kvCacheUsage = combined(samples, names.kvCacheUsage, 'mean');
    if (running === null && waiting === null && kvCacheUsage === null) continue;
    const hitRateGauge = combined(samples, names.hitRateGauge, 'mean');
    const prefixQueries = combined(samples, names.prefixQueries, 'sum');
    const prefixHits = combined(samples, names.prefixHits, 'sum');
    const counters = prefixQueries !== null && prefixHits !== null;
    return {
      engine, running: running ?? 0, waiting: waiting ?? 0, kvCacheUsage: ratio(kvCacheUsage ?? 0),
      prefixQueries: counters ? prefixQueries : null, prefixHits: counters ? prefixHits : null,
      // vLLM V0 says -1 for a device without prefix caching.
      hitRateGauge: hitRateGauge === null || hitRateGauge < 0 ? null : ratio(hitRateGauge),
    };
  }
  return null;
}

/**
 * Turns successive pages of one engine into signals. The prefix-cache hit rate comes from the
 * counters' growth since the previous page (hits / queries over the interval, not over the
 * engine's lifetime); an interval without prompts keeps the last rate. A counter that went
 * down means the engine restarted: its values since then are the interval's. Without
 * counters, the engine's own hit-rate gauge is used.
 */
export class PrometheusSignals {
  private previous: EngineMetricsPage | null = null;
  private lastRate: number | null = null;

  /** Signals from one page; null when the page holds none (the previous page stays the baseline). */
  read(text: string): EngineSignals | null {
    const page = parseEngineMetrics(text);
    if (!page) return null;
    const previous = this.previous?.engine === page.engine ? this.previous : null;
    this.previous = page;
    this.lastRate = this.hitRate(previous, page);
    return { running: page.running, waiting: page.waiting, kvCacheUsage: page.kvCacheUsage, prefixCacheHitRate: this.lastRate };
  }

  private hitRate(previous: EngineMetricsPage | null, page: EngineMetricsPage): number | null {
    if (page.prefixQueries === null || page.prefixHits === null) return page.hitRateGauge ?? this.lastRate;
    if (previous?.prefixQueries == null || previous.prefixHits == null) return this.lastRate ?? page.hitRateGauge;
    const restarted = page.prefixQueries < previous.prefixQueries || page.prefixHits < previous.prefixHits;
    const queries = restarted ? page.prefixQueries : page.prefixQueries - previous.prefixQueries;
    const hits = restarted ? page.prefixHits : page.prefixHits - previous.prefixHits;
    if (!(queries > 0)) return this.lastRate;
    return ratio(hits / queries);
  }
}

/** The wanted samples of a page, by name. Malformed lines are skipped. */
function readSamples(text: string): Map<string, Sample[]> {
  const samples = new Map<string, Sample[]>();
  let start = 0;
  while (start < text.length) {
    let end = text.indexOf('\n', start);
    if (end < 0) end = text.length;
    const line = text.charCodeAt(start) === 0x23 /* # */ ? '' : text.slice(start, end);
    start = end + 1;
    if (!line.startsWith('vllm:') && !line.startsWith('sglang:')) continue;
    const sample = parseSampleLine(line);
    if (!sample || !WANTED.has(sample.name)) continue;
    const list = samples.get(sample.name);
    if (list) list.push(sample);
    else samples.set(sample.name, [sample]);
  }
  return samples;
}

/** `name{label="value",...} value [timestamp] [# exemplar]`, or null when it is not one. */
export function parseSampleLine(line: string): (Sample & { readonly name: string }) | null {
  const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)/.exec(line);
  if (!match) return null;
  const name = match[1];
  let index = name.length;
  let labels: Record<string, string> = {};
  if (line[index] === '{') {
    const parsed = parseLabels(line, index + 1);
    if (!parsed) return null;
    labels = parsed.labels;
    index = parsed.end;
  }
  const rest = line.slice(index).trim().split(/\s+/);
  if (rest.length === 0 || rest[0] === '') return null;
  const value = parseValue(rest[0]);
  return value === null ? null : { name, labels, value };
}

/** Labels from just after `{` to just after `}`; escapes `\\`, `\"` and `\n` in values. */
function parseLabels(line: string, from: number): { labels: Record<string, string>; end: number } | null {
  const labels: Record<string, string> = {};
  let index = from;
  for (;;) {
    while (line[index] === ' ' || line[index] === ',') index++;
    if (line[index] === '}') return { labels, end: index + 1 };
    const key = /^[a-zA-Z_][a-zA-Z0-9_]*/.exec(line.slice(index, index + 256));
    if (!key) return null;
    index += key[0].length;
    while (line[index] === ' ') index++;
    if (line[index] !== '=') return null;
    index++;
    while (line[index] === ' ') index++;
    if (line[index] !== '"') return null;
    index++;
    let value = '';
    for (;;) {
      const char = line[index];
      if (char === undefined) return null;
      index++;
      if (char === '"') break;
      if (char === '\\') {
        const escaped = line[index++];
        value += escaped === 'n' ? '\n' : escaped ?? '';
      } else {
        value += char;
      }
    }
    labels[key[0]] = value;
  }
}

/** A Go-formatted float (`1.0`, `8.128902e+06`, `+Inf`, `NaN`); null when it is none. */
function parseValue(text: string): number | null {
  if (text === '+Inf' || text === 'Inf') return Infinity;
  if (text === '-Inf') return -Infinity;
  if (text === 'NaN') return NaN;
  if (!/^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$/.test(text)) return null;
  return Number(text);
}

/**
 * The first of `names` the page has, its series combined: series that differ only in a rank
 * label count once (the largest), the rest are summed or averaged. Non-finite values are
 * skipped; null when no name has a usable series.
 */
function combined(samples: ReadonlyMap<string, Sample[]>, names: readonly string[], how: 'sum' | 'mean'): number | null {
  for (const name of names) {
    const series = samples.get(name);
    if (!series) continue;
    const values = [...perScheduler(aggregatePriority(series)).values()];
    if (values.length === 0) continue;
    const sum = values.reduce((total, value) => total + value, 0);
    return how === 'sum' ? sum : sum / values.length;
  }
  return null;
}

/** SGLang with priority scheduling adds per-priority series beside the total (`priority=""`): keep the total. */
function aggregatePriority(series: readonly Sample[]): readonly Sample[] {
  const total = series.filter((sample) => sample.labels.priority === '');
  return total.length > 0 ? total : series;
}

/** One value per scheduler: the key is the labels without rank labels. */
function perScheduler(series: readonly Sample[]): Map<string, number> {
  const values = new Map<string, number>();
  for (const sample of series) {
    if (!Number.isFinite(sample.value)) continue;
    const key = Object.keys(sample.labels).filter((label) => !RANK_LABELS.has(label)).sort()
      .map((label) => `${label}=${sample.labels[label]}`).join('\u0000');
    values.set(key, Math.max(values.get(key) ?? -Infinity, sample.value));
  }
  return values;
}
