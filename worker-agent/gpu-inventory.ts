import type { Gpu } from '../proto/worker/v1/index';

const GIB = 1024 ** 3;

/**
 * Parses WORKER_GPUS: either JSON, `[{"name": "H100", "memoryGiB": 80}]` (or `memoryBytes`,
 * optional `index`), or the short form `H100:80,H100:80` with memory in GiB. Names may contain
 * colons (`NVIDIA H100 80GB HBM3:80`), so the memory is after the last one. Returns undefined
 * when the text is neither.
 */
export function parseGpuList(text: string): Gpu[] | undefined {
  const trimmed = text.trim();
  if (trimmed === '') return [];
  return trimmed.startsWith('[') ? parseJsonList(trimmed) : parseShortList(trimmed);
}

function parseJsonList(text: string): Gpu[] | undefined {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (!Array.isArray(parsed)) return undefined;
  const gpus: Gpu[] = [];
  for (const [position, item] of parsed.entries()) {
    const memoryBytes = typeof item?.memoryBytes === 'number' ? item.memoryBytes : typeof item?.memoryGiB === 'number' ? item.memoryGiB * GIB : undefined;
    if (typeof item?.name !== 'string' || memoryBytes === undefined) return undefined;
    gpus.push({ name: item.name, memoryBytes: Math.round(memoryBytes), index: typeof item.index === 'number' ? item.index : position });
  }
  return gpus;
}

function parseShortList(text: string): Gpu[] | undefined {
  const gpus: Gpu[] = [];
  for (const [position, entry] of text.split(',').entries()) {
    const colon = entry.lastIndexOf(':');
    const name = entry.slice(0, colon).trim();
    const memoryGiB = Number(entry.slice(colon + 1));
    if (colon === -1 || name === '' || !Number.isFinite(memoryGiB) || memoryGiB < 0) return undefined;
    gpus.push({ name, memoryBytes: Math.round(memoryGiB * GIB), index: position });
  }
  return gpus;
}
