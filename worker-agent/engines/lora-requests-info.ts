/**
 * vLLM's `vllm:lora_requests_info` gauge: which adapters its scheduler runs and which wait,
 * as comma-separated label values (`running_lora_adapters`, `waiting_lora_adapters`, and
 * `max_lora`, its --max-loras). vLLM sets the gauge to the current time for the current label
 * set and never removes older sets, so the page may hold several series: the newest (the
 * highest value) is the engine's present state.
 */
import { parseSampleLine } from './prometheus-signals';

export interface LoraRequestsInfo {
  readonly running: readonly string[];
  readonly waiting: readonly string[];
  /** The engine's --max-loras, when it says. */
  readonly maxLora: number | null;
}

const METRIC = 'vllm:lora_requests_info';

/** The newest series of the gauge on a /metrics page; null when the page has none (LoRA off, or not vLLM). */
export function parseLoraRequestsInfo(text: string): LoraRequestsInfo | null {
  let newest: { labels: Record<string, string>; value: number } | null = null;
  for (const line of text.split('\n')) {
    if (!line.startsWith(METRIC)) continue;
    const sample = parseSampleLine(line);
    if (sample?.name !== METRIC) continue;
    if (!newest || sample.value >= newest.value) newest = sample;
  }
  if (!newest) return null;
  const names = (value: string | undefined) => (value ?? '').split(',').map((name) => name.trim()).filter((name) => name !== '');
  const maxLora = Number.parseInt(newest.labels.max_lora ?? '', 10);
  return { running: names(newest.labels.running_lora_adapters), waiting: names(newest.labels.waiting_lora_adapters), maxLora: Number.isFinite(maxLora) ? maxLora : null };
}
