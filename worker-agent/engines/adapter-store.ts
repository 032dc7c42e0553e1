/**
 * Adapter weights on the agent's disk: fetched once from their presigned URL, checked against
 * their sha256 and size before anything reads them, and kept under `--adapter-dir` by checksum
 * (so a revision with the same bytes, or another workspace's copy of them, is not fetched
 * again). One fetch per checksum at a time, however many jobs ask. A PEFT tar is unpacked into
 * a directory an engine can load; a lone safetensors file gets the `adapter_config.json` vLLM
 * needs beside it. Disk use is bounded: beyond `maxBytes` the least recently used entries that
 * no loaded adapter holds are deleted.
 */
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { request } from 'undici';
import { inspectAdapter, tarFiles } from '../../common/adapter-formats';
import type { AdapterRef } from '../../proto/worker/v1/index';
import { adapterLoadFailed } from './adapter-failure';

export interface AdapterStoreOptions {
  readonly directory: string;
  /** Disk the cache may use; least recently used entries not held are deleted beyond it. */
  readonly maxBytes: number;
  readonly fetchTimeoutMs: number;
}

/** Where an engine finds the adapter: a GGUF file, or a directory holding a PEFT adapter. */
export interface LocalAdapter {
  readonly path: string;
  /** The checksum it is stored under: `hold` / `release` it while an engine uses the files. */
  readonly key: string;
}

interface StoredEntry {
  readonly path: string;
  bytes: number;
  /** Its place in the order of use (a counter, not a clock: two uses in one millisecond still have an order). */
  lastUsed: number;
  holders: number;
}

const SHA256 = /^[0-9a-f]{64}$/;

export class AdapterStore {
  private readonly entries = new Map<string, StoredEntry>();
  private readonly fetches = new Map<string, Promise<LocalAdapter>>();
  private uses = 0;

  constructor(private readonly options: AdapterStoreOptions) {}

  /** The next place in the order of use (what LRU eviction sorts by). */
  private nextUse(): number {
    return ++this.uses;
  }

  /** The adapter's files on disk, fetched and checked first when not there yet. Throws adapter_load_failed. */
  async materialize(ref: AdapterRef): Promise<LocalAdapter> {
    const key = ref.sha256.toLowerCase();
    if (!SHA256.test(key)) throw adapterLoadFailed('invalid', `adapter ${label(ref)} has no valid sha256 to check its weights against`);
    const stored = this.entries.get(key);
    if (stored && fs.existsSync(stored.path)) {
      stored.lastUsed = this.nextUse();
      return { path: stored.path, key };
    }
    let fetching = this.fetches.get(key);
    if (!fetching) {
      fetching = this.fetchAndStore(ref, key).finally(() => this.fetches.delete(key));
      this.fetches.set(key, fetching);
    }
    return await fetching;
  }

  /** An engine uses these files now (vLLM may read them again when it swaps the adapter in): never evicted until released. */
  hold(key: string): void {
    const entry = this.entries.get(key);
    if (entry) entry.holders += 1;
  }

  release(key: string): void {
    const entry = this.entries.get(key);
    if (!entry) return;
    entry.holders = Math.max(0, entry.holders - 1);
    entry.lastUsed = this.nextUse();
    this.evict();
  }

  /** Bytes the cache holds on disk. */
  get usedBytes(): number {
    let total = 0;
    for (const entry of this.entries.values()) total += entry.bytes;
    return total;
  }

  private async fetchAndStore(ref: AdapterRef, key: string): Promise<LocalAdapter> {
    await fs.promises.mkdir(this.options.directory, { recursive: true });
    const download = path.join(this.options.directory, `${key}.part-${process.pid}`);
    try {
      const bytes = await this.fetchVerified(ref, key, download);
      const target = path.join(this.options.directory, ref.format === 'ADAPTER_FORMAT_GGUF' ? `${key}.gguf` : key);
      await fs.promises.rm(target, { recursive: true, force: true });
      if (ref.format === 'ADAPTER_FORMAT_GGUF') await fs.promises.rename(download, target);
      else await unpackPeft(ref, await fs.promises.readFile(download), target);
      this.entries.set(key, { path: target, bytes, lastUsed: this.nextUse(), holders: 0 });
      this.evict();
      return { path: target, key };
    } finally {
      await fs.promises.rm(download, { force: true });
    }
  }

  /** Streams the source to `file`, hashing and counting as it goes; the bytes' count when they match the ref. */
  private async fetchVerified(ref: AdapterRef, key: string, file: string): Promise<number> {
    const limit = ref.sizeBytes > 0 ? ref.sizeBytes : this.options.maxBytes;
    const hash = createHash('sha256');
    let size = 0;
    try {
      const response = await request(ref.source, { method: 'GET', signal: AbortSignal.timeout(this.options.fetchTimeoutMs) });
      if (response.statusCode !== 200) {
        await response.body.dump().catch(() => undefined);
        throw adapterLoadFailed('fetch', `adapter ${label(ref)}: fetching its weights answered HTTP ${response.statusCode}`);
      }
      const out = fs.createWriteStream(file);
      try {
        for await (const chunk of response.body as AsyncIterable<Buffer>) {
          size += chunk.length;
          // Leaving the loop (the throw) destroys the body.
          if (size > limit) {
            throw adapterLoadFailed('fetch', `adapter ${label(ref)}: its weights are larger than the ${limit} bytes expected`);
          }
          hash.update(chunk);
          if (!out.write(chunk)) await new Promise<void>((resolve) => out.once('drain', () => resolve()));
        }
      } finally {
        await new Promise<void>((resolve, reject) => out.end((error?: Error | null) => (error ? reject(error) : resolve())));
      }
    } catch (error) {
      if ((error as { code?: string }).code === 'adapter_load_failed') throw error;
      // The error's own text may quote the URL (a presigned URL is a credential): only its kind is told.
      throw adapterLoadFailed('fetch', `adapter ${label(ref)}: its weights could not be fetched (${fetchErrorKind(error)})`, error);
    }
    if (ref.sizeBytes > 0 && size !== ref.sizeBytes) throw adapterLoadFailed('fetch', `adapter ${label(ref)}: fetched ${size} bytes, expected ${ref.sizeBytes}`);
    if (hash.digest('hex') !== key) throw adapterLoadFailed('fetch', `adapter ${label(ref)}: the fetched weights do not match their sha256`);
    return size;
  }

  /** Deletes the least recently used entries nobody holds until the cache fits `maxBytes`. */
  private evict(): void {
    let excess = this.usedBytes - this.options.maxBytes;
    if (excess <= 0) return;
    const candidates = [...this.entries.entries()].filter(([, entry]) => entry.holders === 0).sort(([, a], [, b]) => a.lastUsed - b.lastUsed);
    for (const [key, entry] of candidates) {
      if (excess <= 0) break;
      excess -= entry.bytes;
      this.entries.delete(key);
      fs.rmSync(entry.path, { recursive: true, force: true });
    }
  }
}

/**
 * A PEFT tar unpacked (the directory that holds adapter_config.json becomes `target`), or a
 * lone safetensors file given the adapter_config.json an engine needs: its rank and target
 * modules read from the file, alpha = rank (scale 1: the format carries no alpha).
 */
async function unpackPeft(ref: AdapterRef, bytes: Buffer, target: string): Promise<void> {
  await fs.promises.mkdir(target, { recursive: true });
  if (ref.format === 'ADAPTER_FORMAT_SAFETENSORS') {
    const facts = inspectOr422(ref, () => inspectAdapter(bytes, 'SAFETENSORS'));
    await fs.promises.writeFile(path.join(target, 'adapter_model.safetensors'), bytes);
    const config = { peft_type: 'LORA', r: facts.rank, lora_alpha: facts.rank, target_modules: facts.targetModules, bias: 'none', task_type: 'CAUSAL_LM' };
    await fs.promises.writeFile(path.join(target, 'adapter_config.json'), JSON.stringify(config));
    return;
  }
  const files = inspectOr422(ref, () => {
    inspectAdapter(bytes, 'PEFT_TAR');
    return tarFiles(bytes);
  });
  const config = [...files.keys()].find((name) => path.posix.basename(name) === 'adapter_config.json') as string;
  const root = path.posix.dirname(config);
  for (const [name, data] of files) {
    if (root !== '.' && !name.startsWith(`${root}/`)) continue;
    const relative = root === '.' ? name : name.slice(root.length + 1);
    const file = path.join(target, ...relative.split('/'));
    await fs.promises.mkdir(path.dirname(file), { recursive: true });
    await fs.promises.writeFile(file, data);
  }
}

function inspectOr422<T>(ref: AdapterRef, read: () => T): T {
  try {
    return read();
  } catch (error) {
    throw adapterLoadFailed('invalid', `adapter ${label(ref)} is malformed: ${(error as Error).message}`, error);
  }
}

function label(ref: AdapterRef): string {
  return ref.displayName || ref.name;
}

function fetchErrorKind(error: unknown): string {
  const name = (error as Error)?.name;
  if (name === 'TimeoutError' || name === 'AbortError') return 'timed out';
  const code = (error as { code?: string })?.code;
  return code && /^[A-Z_]+$/.test(code) ? code : 'connection failed';
}
