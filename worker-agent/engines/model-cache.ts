/**
 * The host's weights cache (`--model-cache-dir`): what makes a second start on the same host
 * skip the download. Two kinds of entries live there:
 *
 * - `files/`: model files the agent fetched itself (the llama-cpp engine's `--model-url`), named
 *   by their sha256 when one was given (checked while streaming, as adapter-store.ts checks
 *   adapters) or else by the hash of their URL without its query (a presigned URL's signature
 *   changes; the file does not). Each has a `.json` beside it naming the catalog models it served
 *   (learnt from the Welcome), so a later agent's Hello can say the host holds them.
 * - `hub/`: a Hugging Face hub cache, when an engine's HF_HOME is this directory (the Kubernetes
 *   provider's model-cache volume): `hub/models--org--name/snapshots/…` is `org/name`, which is
 *   how the catalog names the models vLLM and SGLang serve.
 *
 * The agent never deletes from it: weights are large and few, and the operator sizes the volume.
 */
import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { request } from 'undici';
import { EngineStartError } from './engine-start-error';
import { parseJsonText } from '../../common/json-nesting';

export interface ModelSource {
  /** http(s) URL of one model file (a GGUF). */
  readonly url: string;
  /** Hex sha256 the file must have; absent: not checked, and the file is known by its URL. */
  readonly sha256?: string;
}

export interface CachedModelFile {
  readonly path: string;
  readonly bytes: number;
  /** Found in the cache: nothing was fetched. */
  readonly cacheHit: boolean;
}

export interface ModelCacheOptions {
  readonly directory: string;
  readonly fetchTimeoutMs: number;
}

const SHA256 = /^[0-9a-f]{64}$/;
/** A Hugging Face hub cache entry of a model: `models--<org>--<name>` (the repo id with `/` as `--`). */
const HUB_MODEL = /^models--(.+)$/;

interface FileLabels {
  models: string[];
}

export class ModelCache {
  /** Keys of the files this process fetched or found: the Welcome's model labels them. */
  private readonly used = new Set<string>();

  constructor(private readonly options: ModelCacheOptions) {}

  get directory(): string {
    return this.options.directory;
  }

  /** The model file on disk: found in the cache, or fetched (and checked) first. `progress` gets 0–1 while fetching. */
  async file(source: ModelSource, progress?: (fraction: number) => void): Promise<CachedModelFile> {
    const sha256 = source.sha256?.toLowerCase();
    if (sha256 !== undefined && !SHA256.test(sha256)) throw new EngineStartError('the model file\'s sha256 must be 64 hex digits');
    const key = sha256 ?? createHash('sha256').update(withoutQuery(source.url)).digest('hex');
    const target = path.join(this.filesDir(), `${key}${extensionOf(source.url)}`);
    this.used.add(key);
    const stat = await fs.promises.stat(target).catch(() => null);
    if (stat?.isFile()) return { path: target, bytes: stat.size, cacheHit: true };
    await fs.promises.mkdir(this.filesDir(), { recursive: true });
    const part = `${target}.part-${process.pid}-${randomBytes(4).toString('hex')}`;
    try {
      const bytes = await this.fetchTo(source, sha256, part, progress);
      await fs.promises.rename(part, target);
      return { path: target, bytes, cacheHit: false };
    } finally {
      await fs.promises.rm(part, { force: true });
    }
  }

  /** The catalog model the replica serves (its Welcome): every file this process used is labelled with it. */
  servedAs(modelId: string): void {
    for (const key of this.used) {
      const labelsFile = path.join(this.filesDir(), `${key}.json`);
      const labels = readLabels(labelsFile);
      if (labels.models.includes(modelId)) continue;
      labels.models.push(modelId);
      fs.mkdirSync(this.filesDir(), { recursive: true });
      fs.writeFileSync(labelsFile, JSON.stringify(labels));
    }
  }

  /** The models the cache holds, for the Hello: labelled files whose file is still there, and the hub cache's models. Sorted. */
  cachedModels(): string[] {
    const models = new Set<string>();
    const files = readDir(this.filesDir());
    for (const name of files) {
      if (!name.endsWith('.json')) continue;
      const key = name.slice(0, -'.json'.length);
      const hasFile = files.some((other) => other !== name && other.startsWith(key) && !other.includes('.part-'));
      if (hasFile) for (const model of readLabels(path.join(this.filesDir(), name)).models) models.add(model);
    }
    const hub = path.join(this.options.directory, 'hub');
    for (const name of readDir(hub)) {
      const match = HUB_MODEL.exec(name);
      // A download that never wrote a snapshot holds no usable weights.
      if (match && readDir(path.join(hub, name, 'snapshots')).length > 0) models.add(match[1].split('--').join('/'));
    }
    return [...models].sort();
  }

  private filesDir(): string {
    return path.join(this.options.directory, 'files');
  }

  /** Streams the file to `file`, hashing and counting; its size once it matches its sha256 (when given). */
  private async fetchTo(source: ModelSource, sha256: string | undefined, file: string, progress?: (fraction: number) => void): Promise<number> {
    const where = withoutQuery(source.url);
    const hash = createHash('sha256');
    let size = 0;
    try {
      const response = await request(source.url, { method: 'GET', signal: AbortSignal.timeout(this.options.fetchTimeoutMs) });
      if (response.statusCode !== 200) {
        await response.body.dump().catch(() => undefined);
        throw new EngineStartError(`fetching the model file ${where} answered HTTP ${response.statusCode}`);
      }
      const expected = Number(response.headers['content-length'] ?? 0);
      const out = fs.createWriteStream(file);
      try {
        for await (const chunk of response.body as AsyncIterable<Buffer>) {
          size += chunk.length;
          hash.update(chunk);
          if (expected > 0) progress?.(Math.min(1, size / expected));
          if (!out.write(chunk)) await new Promise<void>((resolve) => out.once('drain', () => resolve()));
        }
      } finally {
        await new Promise<void>((resolve, reject) => out.end((error?: Error | null) => (error ? reject(error) : resolve())));
      }
    } catch (error) {
      if (error instanceof EngineStartError) throw error;
      // The error's own text may quote the URL with its query (a presigned URL is a credential).
      throw new EngineStartError(`the model file ${where} could not be fetched (${fetchErrorKind(error)})`, { cause: error });
    }
    if (sha256 !== undefined && hash.digest('hex') !== sha256) throw new EngineStartError(`the model file fetched from ${where} does not match its sha256`);
    return size;
  }
}

function withoutQuery(url: string): string {
  const parsed = new URL(url);
  return `${parsed.origin}${parsed.pathname}`;
}

/** The URL's file extension (`.gguf`), kept so tools reading the cache recognise the file; none when odd. */
function extensionOf(url: string): string {
  const extension = path.posix.extname(new URL(url).pathname).toLowerCase();
  return /^\.[a-z0-9]{1,10}$/.test(extension) ? extension : '';
}

function readDir(directory: string): string[] {
  try {
    return fs.readdirSync(directory);
  } catch {
    return [];
  }
}

function readLabels(file: string): FileLabels {
  try {
    // The directory is shared with the engine (and whoever else the operator lets write it): read with the nesting scan.
    const parsed = parseJsonText(fs.readFileSync(file)) as Partial<FileLabels>;
    return { models: Array.isArray(parsed.models) ? parsed.models.filter((model): model is string => typeof model === 'string') : [] };
  } catch {
    return { models: [] };
  }
}

function fetchErrorKind(error: unknown): string {
  const name = (error as Error)?.name;
  if (name === 'TimeoutError' || name === 'AbortError') return 'timed out';
  const code = (error as { code?: string })?.code;
  return code && /^[A-Z_]+$/.test(code) ? code : 'connection failed';
}
