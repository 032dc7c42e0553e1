/**
 * Any OpenAI-compatible HTTP engine: vLLM, SGLang, llama.cpp server, TGI. Requests go through
 * an undici `Pool` on its dispatch API (engine-call.ts; not fetch: WHATWG streams cost a fifth
 * of the CPU on this hot path, see docs/performance.md#avoid-fetch-and-web-streams) and response bytes are forwarded as they arrive.
 */
import { Pool, type Dispatcher } from 'undici';
import type { Engine, EngineHealthReport, EngineJob, EngineResult, EngineSink, MediaFiles, MediaJob } from './engine';
import { generateOpenAiImages } from './openai-media';
import { EngineFailure } from './engine-failure';
import { EngineHealthProbe } from './engine-health-probe';
import { prepareEngineRequest } from './engine-request';
import { EngineCall } from './engine-call';
import { forwardEmbeddingsBody, forwardJsonBody, StreamForwarder } from './engine-response';
import type { JobCancellation } from '../job-cancellation';
import { promptTextOf } from './prompt-text';

export interface OpenAiEngineOptions {
  /** Base URL with or without a trailing `/v1`, e.g. `http://gpu-host:8000`. */
  readonly url: string;
  /** Model name sent to the engine instead of the job's catalog model (vLLM's served-model-name). */
  readonly engineModel?: string;
  /** Bearer token for engines started with an API key. */
  readonly apiKey?: string;
  /** Connections kept to the engine; one per concurrent job plus the health probe. */
  readonly connections: number;
  readonly connectTimeoutMs: number;
  readonly healthIntervalMs: number;
  /** The engine runs priority scheduling with lower values first (vLLM `--scheduling-policy priority`). @default false */
  readonly priorityScheduling?: boolean;
}

/**
 * vLLM's `priority` for guest jobs (lower is served first). Owner jobs keep the default 0, so
 * their bodies are exactly what they are on an unshared replica; 10 leaves room for tiers between.
 */
export const GUEST_PRIORITY = 10;

export class OpenAiEngine implements Engine {
  readonly kind = 'openai';
  readonly version = '';
  readonly url: string;
  readonly priorityCapable: boolean;
  private readonly pool: Pool;
  private readonly basePath: string;
  private readonly headers: Record<string, string>;
  private readonly probe: EngineHealthProbe;

  constructor(private readonly options: OpenAiEngineOptions) {
    const url = new URL(options.url);
    this.url = options.url;
    this.priorityCapable = options.priorityScheduling === true;
    this.basePath = url.pathname.replace(/\/+$/, '').replace(/\/v1$/, '');
    this.pool = new Pool(url.origin, { connections: options.connections + 1, connectTimeout: options.connectTimeoutMs });
    this.headers = { 'content-type': 'application/json', ...(options.apiKey ? { authorization: `Bearer ${options.apiKey}` } : {}) };
    this.probe = new EngineHealthProbe((signal) => this.listModels(signal), options.healthIntervalMs, options.connectTimeoutMs);
  }

  start(): Promise<void> {
    return this.probe.start();
  }

  models(): readonly string[] {
    return this.probe.models();
  }

  health(): EngineHealthReport {
    return this.probe.health();
  }

  async run(job: EngineJob, sink: EngineSink, cancellation: JobCancellation): Promise<EngineResult> {
    // The control plane sends guests only to agents welcomed with priority scheduling, which an
    // engine without it never is; a FCFS vLLM would also answer an error to the priority field.
    if (job.guest && !this.priorityCapable) throw new EngineFailure('invalid_job', 'this replica does not serve guests: its engine does not run priority scheduling');
    const request = prepareEngineRequest(job, this.options.engineModel, job.guest ? GUEST_PRIORITY : undefined);
    const promptText = () => promptTextOf(request.payload, request.path);
    const forwarder = job.stream ? new StreamForwarder(sink, job.includeUsage, promptText) : null;
    return await new Promise<EngineResult>((resolve, reject) => {
      this.pool.dispatch(
        { method: 'POST', path: this.basePath + request.path, headers: this.headers, body: request.bytes },
        new EngineCall(forwarder, sink, cancellation, promptText, this.url,
          request.path === '/v1/embeddings' ? forwardEmbeddingsBody : forwardJsonBody, resolve, reject),
      );
    });
  }

  /** Image jobs on the engine's OpenAI image endpoints (no progress: those APIs report none). */
  async generateMedia(job: MediaJob, _progress: unknown, cancellation: JobCancellation): Promise<MediaFiles> {
    return await generateOpenAiImages({
      request: (options) => this.pool.request(options), basePath: this.basePath, headers: this.headers,
      engineModel: this.options.engineModel, url: this.url,
    }, job, cancellation);
  }

  async close(): Promise<void> {
    this.probe.stop();
    await this.pool.destroy();
  }

  private async send(method: 'GET' | 'POST', path: string, body: Buffer | undefined, signal: AbortSignal): Promise<Dispatcher.ResponseData> {
    try {
      return await this.pool.request({ method, path: this.basePath + path, headers: this.headers, body, signal });
    } catch (error) {
      if (signal.aborted) throw error;
      throw new EngineFailure('engine_unavailable', `engine at ${this.url} could not be reached: ${(error as Error).message}`, { cause: error });
    }
  }

  private async listModels(signal: AbortSignal): Promise<string[]> {
    const response = await this.send('GET', '/v1/models', undefined, signal);
    const body = await readBody(response);
    if (response.statusCode >= 400) throw new Error(`GET /v1/models answered ${response.statusCode}`);
    const data = (JSON.parse(body.toString('utf8')) as { data?: Array<{ id?: unknown }> }).data ?? [];
    return data.map((model) => model.id).filter((id): id is string => typeof id === 'string');
  }
}

async function readBody(response: Dispatcher.ResponseData): Promise<Buffer> {
  return Buffer.from(await response.body.arrayBuffer());
}
