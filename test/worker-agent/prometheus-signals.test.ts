import fs from 'node:fs';
import path from 'node:path';
import { crossesThreshold, engineSignalsFrame } from '../../worker-agent/engines/engine-signals';
import { parseEngineMetrics, parseSampleLine, PrometheusSignals } from '../../worker-agent/engines/prometheus-signals';

const FIXTURES = path.join(__dirname, '../fixtures/engine-metrics');
const fixture = (name: string) => fs.readFileSync(path.join(FIXTURES, name), 'utf8');

/** The same page with every sample of `name` set to `value` (a later scrape of the engine). */
function withValue(text: string, name: string, value: string): string {
  return text.split('\n').map((line) => (line.startsWith(`${name}{`) ? line.replace(/ \S+$/, ` ${value}`) : line)).join('\n');
}

describe('parseEngineMetrics on recorded pages', () => {
  test('vLLM 0.10 (text 0.0.4): new names win over the deprecated ones beside them, no sample counted twice', () => {
    expect(parseEngineMetrics(fixture('vllm-0.10-text-scrape-1.prom'))).toEqual({
      engine: 'vllm', running: 12, waiting: 0, kvCacheUsage: 0.41274189239359155,
      prefixQueries: 2_418_176, prefixHits: 1_653_312, hitRateGauge: null,
    });
  });

  test('vLLM 0.11 with two data-parallel engines (OpenMetrics): counts and counters summed, KV use averaged', () => {
    const page = parseEngineMetrics(fixture('vllm-0.11-dp2-openmetrics.txt'))!;
    expect(page).toMatchObject({ engine: 'vllm', running: 46, waiting: 3, prefixQueries: 8_812_336 + 8_790_528, prefixHits: 6_107_136 + 6_021_632 });
    expect(page.kvCacheUsage).toBeCloseTo((0.6211503086419753 + 0.5804012345679012) / 2, 12);
  });

  test('vLLM 0.8 V1 (before the 0.9 renames): gpu_cache_usage_perc and the gpu_prefix_cache_* counters', () => {
    expect(parseEngineMetrics(fixture('vllm-0.8-v1-text.prom'))).toEqual({
      engine: 'vllm', running: 5, waiting: 2, kvCacheUsage: 0.2734375, prefixQueries: 409_600, prefixHits: 122_880, hitRateGauge: null,
    });
  });

  test('vLLM 0.6 V0: the hit-rate gauge (its -1 "disabled" CPU twin is not read)', () => {
    expect(parseEngineMetrics(fixture('vllm-0.6-v0-text.prom'))).toEqual({
      engine: 'vllm', running: 9, waiting: 4, kvCacheUsage: 0.96875, prefixQueries: null, prefixHits: null, hitRateGauge: 0.3431372549019608,
    });
  });

  test('SGLang 0.4 (the docs\' example output): running, queue, token usage and the cache-hit-rate gauge', () => {
    expect(parseEngineMetrics(fixture('sglang-0.4-text.prom'))).toEqual({
      // prompt_tokens_total alone is no hit-rate counter pair.
      engine: 'sglang', running: 162, waiting: 2826, kvCacheUsage: 0.28, prefixQueries: null, prefixHits: null, hitRateGauge: 0.007507552643049313,
    });
  });

  test('SGLang 0.5 with DP attention and metrics on every TP rank: each DP group counted once', () => {
    const page = parseEngineMetrics(fixture('sglang-0.5-dp2-text.prom'))!;
    expect(page).toMatchObject({ engine: 'sglang', running: 41 + 38, waiting: 5 + 2, prefixQueries: 44_040_192, prefixHits: 27_262_976 });
    expect(page.kvCacheUsage).toBeCloseTo(0.85, 12);
    expect(page.hitRateGauge).toBeCloseTo((0.6412 + 0.5987) / 2, 12);
  });
});

describe('PrometheusSignals over successive scrapes', () => {
  test('the hit rate is the counters\' growth over the interval, not their lifetime ratio', () => {
    const reader = new PrometheusSignals();
    expect(reader.read(fixture('vllm-0.10-text-scrape-1.prom'))).toEqual({
      running: 12, waiting: 0, kvCacheUsage: 0.41274189239359155, prefixCacheHitRate: null,
    });
    const second = reader.read(fixture('vllm-0.10-text-scrape-2.prom'))!;
    expect(second).toMatchObject({ running: 31, waiting: 7, kvCacheUsage: 0.9316058857164535 });
    expect(second.prefixCacheHitRate).toBeCloseTo((1_741_440 - 1_653_312) / (2_531_840 - 2_418_176), 12);
    expect(second.prefixCacheHitRate).not.toBeCloseTo(1_741_440 / 2_531_840, 2);
  });

  test('an interval without prompts keeps the last rate; a counter that went down (engine restart) starts afresh', () => {
    const reader = new PrometheusSignals();
    const first = fixture('vllm-0.8-v1-text.prom');
    reader.read(first);
    const later = withValue(withValue(first, 'vllm:gpu_prefix_cache_queries_total', '419600.0'), 'vllm:gpu_prefix_cache_hits_total', '130880.0');
    expect(reader.read(later)!.prefixCacheHitRate).toBeCloseTo(0.8, 12);
    expect(reader.read(later)!.prefixCacheHitRate).toBeCloseTo(0.8, 12);
    const restarted = withValue(withValue(first, 'vllm:gpu_prefix_cache_queries_total', '1000.0'), 'vllm:gpu_prefix_cache_hits_total', '250.0');
    expect(reader.read(restarted)!.prefixCacheHitRate).toBeCloseTo(0.25, 12);
  });

  test('OpenMetrics counters (family typed without _total) give the same interval rate', () => {
    const reader = new PrometheusSignals();
    const first = fixture('vllm-0.11-dp2-openmetrics.txt');
    reader.read(first);
    const next = first
      .replace('vllm:prefix_cache_queries_total{model_name="meta-llama/Llama-3.1-70B-Instruct",engine="0"} 8.812336e+06',
        'vllm:prefix_cache_queries_total{model_name="meta-llama/Llama-3.1-70B-Instruct",engine="0"} 8.822336e+06')
      .replace('vllm:prefix_cache_hits_total{model_name="meta-llama/Llama-3.1-70B-Instruct",engine="0"} 6.107136e+06',
        'vllm:prefix_cache_hits_total{model_name="meta-llama/Llama-3.1-70B-Instruct",engine="0"} 6.116136e+06');
    expect(reader.read(next)!.prefixCacheHitRate).toBeCloseTo(0.9, 12);
  });

  test('SGLang: the gauge until two scrapes of its counters, then their growth', () => {
    const reader = new PrometheusSignals();
    const first = fixture('sglang-0.5-dp2-text.prom');
    expect(reader.read(first)!.prefixCacheHitRate).toBeCloseTo(0.61995, 12);
    const next = withValue(withValue(first, 'sglang:prompt_tokens_total', '4.4050192e+07'), 'sglang:cached_tokens_total', '2.7265476e+07');
    expect(reader.read(next)!.prefixCacheHitRate).toBeCloseTo(0.25, 12);
  });

  test('a page without signals (an error page, another exporter) reads null and keeps the baseline', () => {
    const reader = new PrometheusSignals();
    reader.read(fixture('vllm-0.10-text-scrape-1.prom'));
    expect(reader.read('<html><body>502 Bad Gateway</body></html>')).toBeNull();
    expect(reader.read(fixture('vllm-0.10-text-scrape-2.prom'))!.prefixCacheHitRate).toBeCloseTo(88_128 / 113_664, 12);
  });
});

describe('parsing edge cases', () => {
  test.each([
    ['empty', ''],
    ['HTML', '<!doctype html><html><head><title>404</title></head></html>'],
    ['JSON', '{"object":"error","message":"Not Found","code":404}'],
    ['binary', Buffer.from([0x1f, 0x8b, 0x08, 0x00, 0xff, 0x00, 0x0a, 0x76]).toString('latin1')],
    ['other exporters only', '# TYPE process_open_fds gauge\nprocess_open_fds 187\nhttp_requests_total{handler="/v1/models"} 3\n'],
    ['truncated labels', 'vllm:num_requests_running{model_name="Qwen/Qwen3-8B",engine="0'],
    ['a value that is no number', 'vllm:num_requests_running{engine="0"} twelve\nsglang:num_queue_reqs 1,5\n'],
    ['a name only', 'vllm:num_requests_waiting\n'],
  ])('%s reads null, never throws', (_name, text) => {
    expect(parseEngineMetrics(text)).toBeNull();
    expect(new PrometheusSignals().read(text)).toBeNull();
  });

  test('escaped label values, timestamps, exemplars, CRLF and NaN are handled', () => {
    const text = [
      'vllm:num_requests_running{model_name="a,\\"b\\"}\\n",engine="0",} 3 1700000000000',
      'vllm:num_requests_running{model_name="other",engine="0"} NaN',
      'vllm:num_requests_waiting{model_name="a"} +Inf',
      'vllm:num_requests_waiting{model_name="b"} 2.0e+00\r',
      'vllm:prefix_cache_queries_total{model_name="a"} 10.0 # {trace_id="3f2a"} 1.0 1700000000.5',
      'vllm:prefix_cache_hits_total{model_name="a"} 4.0',
    ].join('\n');
    expect(parseEngineMetrics(text)).toEqual({
      engine: 'vllm', running: 3, waiting: 2, kvCacheUsage: 0, prefixQueries: 10, prefixHits: 4, hitRateGauge: null,
    });
    expect(parseSampleLine('vllm:x{a="1",b = "2"} 5')).toEqual({ name: 'vllm:x', labels: { a: '1', b: '2' }, value: 5 });
  });

  test('SGLang\'s per-priority series are left out when the total (priority="") is there', () => {
    const text = [
      'sglang:num_running_reqs{pp_rank="0",priority="",tp_rank="0"} 14.0',
      'sglang:num_running_reqs{pp_rank="0",priority="0",tp_rank="0"} 14.0',
      'sglang:num_running_reqs{pp_rank="0",priority="10",tp_rank="0"} 0.0',
      'sglang:num_queue_reqs{pp_rank="0",priority="0",tp_rank="0"} 2.0',
      'sglang:num_queue_reqs{pp_rank="0",priority="10",tp_rank="0"} 3.0',
    ].join('\n');
    expect(parseEngineMetrics(text)).toMatchObject({ engine: 'sglang', running: 14, waiting: 5 });
  });

  test('a KV use above 1 is clamped', () => {
    expect(parseEngineMetrics('vllm:kv_cache_usage_perc{engine="0"} 1.02')!.kvCacheUsage).toBe(1);
  });
});

describe('engine signals on the heartbeat', () => {
  const idle = { running: 0, waiting: 0, kvCacheUsage: 0.5, prefixCacheHitRate: null };

  test('the frame leaves out an unknown engine and marks an unknown hit rate', () => {
    expect(engineSignalsFrame(null)).toBeUndefined();
    expect(engineSignalsFrame({ running: 3.4, waiting: -1, kvCacheUsage: 1.2, prefixCacheHitRate: null }))
      .toEqual({ running: 3, waiting: 0, kvCacheUsage: 1, prefixCacheHitRate: 0, prefixCacheHitRateKnown: false });
    expect(engineSignalsFrame({ ...idle, prefixCacheHitRate: 0.25 })).toMatchObject({ prefixCacheHitRate: 0.25, prefixCacheHitRateKnown: true });
  });

  test.each([
    ['requests start to wait: early', idle, { ...idle, waiting: 1 }, true],
    ['more requests wait: not early', { ...idle, waiting: 1 }, { ...idle, waiting: 5 }, false],
    ['the KV cache fills past 0.9: early', idle, { ...idle, kvCacheUsage: 0.9 }, true],
    ['the KV cache drains below 0.9: early', { ...idle, kvCacheUsage: 0.95 }, { ...idle, kvCacheUsage: 0.7 }, true],
    ['the KV cache moves below 0.9: not early', idle, { ...idle, kvCacheUsage: 0.89, running: 40 }, false],
    ['the first reading already waits: early', null, { ...idle, waiting: 2 }, true],
    ['the engine stops reporting: not early', { ...idle, waiting: 2 }, null, false],
  ])('%s', (_name, previous, next, expected) => {
    expect(crossesThreshold(previous, next)).toBe(expected);
  });
});
