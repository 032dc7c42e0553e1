/**
 * Any OpenAI-compatible HTTP engine: vLLM, SGLang, llama.cpp server, TGI. Requests go through
 * an undici `Pool` on its dispatch API (engine-call.ts; not fetch: WHATWG streams cost a fifth
 * of the CPU on this hot path, see docs/performance.md#avoid-fetch-and-web-streams) and response bytes are forwarded as they arrive.
 */
import { Pool, type Dispatcher } from 'undici';
import type { BatchPreemption, Engine, EngineHealthReport, EngineJob, EngineResult, EngineSink, MediaFiles, MediaJob } from './engine';
import { generateOpenAiImages } from './openai-media';
import { EngineFailure } from './engine-failure';
import { EngineHealthProbe } from './engine-health-probe';
import { prepareEngineRequest } from './engine-request';
import { EngineCall, ReleasingHandler } from './engine-call';
import { forwardEmbeddingsBody, forwardJsonBody, StreamForwarder } from './engine-response';
import { modelRename, type ModelRename } from './model-rename';
import type { JobCancellation } from '../job-cancellation';
import { promptTextOf } from './prompt-text';
import { cacheTenantOf } from './cache-tenant';
import type { EngineSignalsRead } from './engine-signals';
import { PrometheusSignals } from './prometheus-signals';
import { parseJsonText } from '../../common/json-nesting';
import type { AdapterRef } from '../../proto/worker/v1/index';
import type { LoraCapacity } from './adapter-options';
import { adapterLoadFailed } from './adapter-failure';
import type { AdapterResidencyView } from './adapter-slots';
import type { AdapterStore } from './adapter-store';
import { OpenAiAdapters, type LoraApiFlavour } from './openai-adapters';
import { parseLoraRequestsInfo } from './lora-requests-info';
import type { StartupPhases } from '../startup-phases';

export interface OpenAiEngineOptions {
  /** Base URL with or without a trailing `/v1`, e.g. `http://gpu-host:8000`. */
  readonly url: string;
  /**
   * Model name sent to the engine instead of the job's catalog model (vLLM's served-model-name).
   * Answers still carry the catalog model: the engine's name in their `model` is replaced.
   */
  readonly engineModel?: string;
  /** Bearer token for engines started with an API key. */
  readonly apiKey?: string;
  /** Connections kept to the engine; one per concurrent job plus the health probe. */
  readonly connections: number;
  readonly connectTimeoutMs: number;
  readonly healthIntervalMs: number;
  /** The engine runs priority scheduling with lower values first (vLLM `--scheduling-policy priority`). @default false */
  readonly priorityScheduling?: boolean;
  /**
   * Path of the engine's Prometheus metrics (vLLM, SGLang with `--enable-metrics`), under the
   * base URL without `/v1`; null reads none (the heartbeats then carry no engine signals).
   * @default '/metrics'
   */
  readonly metricsPath?: string | null;
  /** How long one metrics scrape may take; a slower one reads as no signals. @default min(connectTimeoutMs, 2000) */
  readonly metricsTimeoutMs?: number;
  /**
   * Send each chat and completion job's `cache_salt` (its tenant's: cache-tenant.ts), which vLLM
   * (0.9 and later, V1 engine) and SGLang (with sgl-project/sglang#23300) hash into their prefix
   * cache, so tenants never reuse each other's cached prompts. False for an engine that cannot
   * (vLLM V0 refuses the field; older vLLM and SGLang accept it and share their cache anyway): the
   * field is not sent, and the agent serves no guests (Hello.priority_capable is false), whose
   * prompts would share the owner's cache. @default true
   */
  readonly cacheSalt?: boolean;
  /**
   * LoRA adapters (openai-adapters.ts): the capacity the engine was started with (vLLM
   * `--max-loras`, `--max-cpu-loras`, `--max-lora-rank`) and where fetched weights go. Absent or
   * `maxLoras` 0: the replica serves no adapter.
   */
  readonly adapters?: { readonly capacity: LoraCapacity; readonly store: AdapterStore };
  /**
   * Once the engine first answers, send it one tiny completion before reporting it ready (the
   * `warm_up` start-up phase): vLLM and SGLang compile and allocate on their first requests.
   * An engine that refuses it (an embedding or image model) is ready all the same. @default false
   */
  readonly warmUp?: boolean;
}

/** A metrics page larger than this is not read (vLLM's is tens of KiB per model). */
const MAX_METRICS_BYTES = 4 * 1024 * 1024;
const METRICS_TIMEOUT_MS = 2_000;
/** How long the engine may take to load or unload one adapter (vLLM reads and checks its weights). */
const LORA_CALL_TIMEOUT_MS = 120_000;
/** prometheus_client answers OpenMetrics only when asked; both are read anyway. */
const METRICS_ACCEPT = 'text/plain;version=0.0.4;q=1,*/*;q=0.1';

/**
 * vLLM's `priority` for guest jobs (lower is served first). Owner jobs keep the default 0, so
 * their bodies are exactly what they are on an unshared replica; 10 leaves room for tiers between.
 */
export const GUEST_PRIORITY = 10;
/** vLLM's `priority` for batch lines on an engine that schedules by priority: below guests. */
export const BATCH_PRIORITY = 20;

/** How long the warm-up request may take: a first request may wait for kernels to compile. */
const WARM_UP_TIMEOUT_MS = 120_000;
const WARM_UP_HEALTH: EngineHealthReport = Object.freeze({ status: 'ENGINE_HEALTH_STARTING', detail: 'warming up the engine: 99 %', loadPercent: 99 });

/** What llama.cpp's server answers as every model's `owned_by` in GET /v1/models. */
export const LLAMA_SERVER_OWNER = 'llamacpp';
/** What SGLang answers as its models' `owned_by`: its runtime-LoRA endpoints are not vLLM's. */
export const SGLANG_OWNER = 'sglang';

export class OpenAiEngine implements Engine {
  readonly kind = 'openai';
  readonly version = '';
  readonly url: string;
  readonly priorityCapable: boolean;
  /** With priority scheduling a live job goes in beside a batch line and the engine runs it first. */
  readonly batchPreemption: BatchPreemption | undefined;
  private readonly pool: Pool;
  private readonly basePath: string;
  private readonly headers: Record<string, string>;
  private readonly probe: EngineHealthProbe;
  private readonly metricsPath: string | null;
  private readonly metrics = new PrometheusSignals();
  private scrape: Promise<EngineSignalsRead> | undefined;
  private readonly salts: boolean;
  /**
   * The engine's GET /v1/models says it is a llama.cpp server (`owned_by: "llamacpp"`): it has no
   * cache salt, and reuses any slot's cached prompt (and its RAM prompt cache) for any request,
   * so it never serves a guest, whatever the agent was told (it has no priority scheduling either).
   */
  private llamaServer = false;
  /** The last job's rename, kept: a replica serves one catalog model, so this is built once. */
  private rename: ModelRename | undefined;
  /** The runtime-LoRA API to call: SGLang's when GET /v1/models says `owned_by: "sglang"`, else vLLM's. */
  private flavour: LoraApiFlavour = 'vllm';
  private readonly loras: OpenAiAdapters | undefined;
  /** The start-up this engine times (given to start()): `load` until it first answers, then `warm_up`. */
  private phases: StartupPhases | undefined;
  /** Whether the warm-up is still to come (`pending`), under way, or over (or not wanted). */
  private warm: 'pending' | 'running' | 'done';
  private warming: Promise<void> | undefined;

  constructor(private readonly options: OpenAiEngineOptions) {
    this.warm = options.warmUp ? 'pending' : 'done';
    const url = new URL(options.url);
    this.url = options.url;
    this.salts = options.cacheSalt !== false;
    this.priorityCapable = options.priorityScheduling === true && this.salts;
    this.batchPreemption = this.priorityCapable ? 'engine' : undefined;
    this.basePath = url.pathname.replace(/\/+$/, '').replace(/\/v1$/, '');
    const metricsPath = options.metricsPath === undefined ? '/metrics' : options.metricsPath;
    this.metricsPath = metricsPath ? this.basePath + metricsPath : null;
    // Beside the jobs' connections: one for the health probe, one for the metrics scrape.
    this.pool = new Pool(url.origin, { connections: options.connections + 2, connectTimeout: options.connectTimeoutMs });
    this.headers = { 'content-type': 'application/json', ...(options.apiKey ? { authorization: `Bearer ${options.apiKey}` } : {}) };
    this.probe = new EngineHealthProbe((signal) => this.listModels(signal), options.healthIntervalMs, options.connectTimeoutMs, () => this.answered());
    const adapters = options.adapters;
    this.loras = adapters && adapters.capacity.maxLoras > 0
      ? new OpenAiAdapters({ capacity: adapters.capacity, store: adapters.store, post: (path, body) => this.postJson(path, body), flavour: () => this.flavour })
      : undefined;
  }

  get adapters(): AdapterResidencyView | undefined {
    return this.loras?.slots;
  }

  /**
   * Probes the engine once and keeps probing. The engine's own start-up (its download and load:
   * vLLM tells the agent neither apart) is the `load` phase, from here to its first answer; the
   * warm-up follows that answer, now or whenever a later probe gets it.
   */
  async start(_progress?: unknown, phases?: StartupPhases): Promise<void> {
    this.phases = phases;
    phases?.begin('load', 'waiting for the engine to answer');
    await this.probe.start();
    await this.warming;
  }

  models(): readonly string[] {
    return this.probe.models();
  }

  /** The probe's verdict, but STARTING while the warm-up request runs: no work before it. */
  health(): EngineHealthReport {
    const report = this.probe.health();
    return report.status === 'ENGINE_HEALTH_HEALTHY' && this.warm !== 'done' ? WARM_UP_HEALTH : report;
  }

  /** A probe got an answer: the first ends the load phase and starts the warm-up. */
  private answered(): void {
    if (this.phases?.current === 'load') this.phases.end('load', { detail: `the engine answered GET /v1/models (${this.probe.models().length} model(s))` });
    if (this.warm !== 'pending') return;
    this.warm = 'running';
    this.warming = this.warmUp();
  }

  /** The warm-up, timed as `warm_up`; the engine reports ready as the phase ends (its heartbeat goes out then). */
  private async warmUp(): Promise<void> {
    this.phases?.begin('warm_up');
    const detail = await this.warmUpRequest();
    this.warm = 'done';
    this.phases?.end('warm_up', { detail });
  }

  /**
   * One completion of one token. Never fails the start: an engine that refuses it (no
   * /v1/completions, an embedding model) or does not answer is ready all the same, and the phase
   * says so.
   */
  private async warmUpRequest(): Promise<string> {
    const model = this.options.engineModel ?? this.probe.models()[0];
    if (!model) return 'skipped: the engine names no model';
    try {
      const response = await this.send('POST', '/v1/completions', Buffer.from(JSON.stringify({ model, prompt: 'Hello', max_tokens: 1 })), AbortSignal.timeout(WARM_UP_TIMEOUT_MS));
      await response.body.dump().catch(() => undefined);
      return response.statusCode < 300 ? '1 token completed' : `skipped: the engine answered ${response.statusCode} to a completion`;
    } catch (error) {
      return `skipped: ${(error as Error).name === 'TimeoutError' ? `no answer within ${WARM_UP_TIMEOUT_MS / 1000} s` : 'the engine could not be reached'}`;
    }
  }

  /**
   * Scrapes the engine's /metrics (the agent asks once per heartbeat; a call while a scrape
   * runs shares it). A scrape that fails, times out or finds no vLLM / SGLang metric reads as
   * null: the heartbeat then carries no signals, and nothing else changes.
   */
  signals(): Promise<EngineSignalsRead> | null {
    if (!this.metricsPath) return null;
    return this.scrape ??= this.scrapeSignals(this.metricsPath).finally(() => { this.scrape = undefined; });
  }

  async run(job: EngineJob, sink: EngineSink, cancellation: JobCancellation): Promise<EngineResult> {
    const adapter = job.adapter;
    if (!adapter) return await this.runJob(job, sink, cancellation, undefined);
    const loras = this.loras;
    if (!loras) throw adapterLoadFailed('invalid', 'this replica serves no adapters (max_loras is 0)');
    // The engine may have lost an adapter the agent loaded (it restarted): it answers 404 to the
    // name, before any output, and one reload and resend follows.
    for (let attempt = 0; ; attempt += 1) {
      const lease = await loras.acquire(adapter);
      try {
        return await this.runJob(job, sink, cancellation, adapter);
      } catch (error) {
        if (attempt > 0 || !(error instanceof EngineFailure) || error.engineStatus !== 404 || cancellation.aborted) throw error;
        loras.forget(adapter.name);
      } finally {
        lease.release();
      }
    }
  }

  private async runJob(job: EngineJob, sink: EngineSink, cancellation: JobCancellation, adapter: AdapterRef | undefined): Promise<EngineResult> {
    // The control plane sends guests only to agents welcomed with priority scheduling, which an
    // engine without it never is; a FCFS vLLM would also answer an error to the priority field.
    if (job.guest && !this.priorityCapable) {
      throw new EngineFailure('invalid_job', `this replica does not serve guests: its engine ${this.salts ? 'does not run priority scheduling' : 'does not salt its prefix cache (WORKER_ENGINE_CACHE_SALT=off)'}`);
    }
    if (job.guest && this.llamaServer) {
      throw new EngineFailure('invalid_job', 'this replica does not serve guests: its engine is a llama.cpp server, whose prompt cache cannot be kept apart per workspace');
    }
    // A FCFS engine would refuse the field, so batch lines get it only where priorities are scheduled.
    const priority = job.guest ? GUEST_PRIORITY : job.batch && this.priorityCapable ? BATCH_PRIORITY : undefined;
    // An adapter is addressed by its engine name; the answer names it as the client did.
    const request = prepareEngineRequest(job, adapter ? adapter.name : this.options.engineModel, priority, this.salts ? cacheTenantOf(job) || undefined : undefined);
    const promptText = () => promptTextOf(request.payload, request.path);
    // The engine answers with the name it was sent; the client must see the catalog model it
    // asked for. Renamed in the bytes the agent reads anyway (the stream filter's scan, the
    // whole body's parse or spans), so a stream is not parsed per chunk for it: model-rename.ts.
    const rename = adapter ? modelRename(adapter.name, adapter.displayName || adapter.name) : this.renameFor(job.model);
    const forwarder = job.stream ? new StreamForwarder(sink, job.includeUsage, promptText, rename) : null;
    return await new Promise<EngineResult>((resolve, reject) => {
      this.pool.dispatch(
        // `traceparent` only when the job is traced: the engine's own spans (vLLM's) then join its trace.
        { method: 'POST', path: this.basePath + request.path, headers: job.traceparent ? { ...this.headers, traceparent: job.traceparent } : this.headers, body: request.bytes },
        new ReleasingHandler(new EngineCall(forwarder, sink, cancellation, promptText, this.url,
          request.path === '/v1/embeddings' ? forwardEmbeddingsBody : forwardJsonBody, resolve, reject, rename)),
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
    // The engine outlives the agent: adapters it holds stay loaded for the next agent, which
    // takes their "already loaded" answer as a load.
    await this.pool.destroy();
  }

  /** What a job's answers need renamed: none when the engine is sent the catalog id itself. */
  private renameFor(catalogModel: string): ModelRename | undefined {
    const engineModel = this.options.engineModel;
    if (engineModel === undefined || engineModel === catalogModel) return undefined;
    if (this.rename?.catalogModel !== catalogModel) this.rename = modelRename(engineModel, catalogModel);
    return this.rename;
  }

  private async send(method: 'GET' | 'POST', path: string, body: Buffer | undefined, signal: AbortSignal): Promise<Dispatcher.ResponseData> {
    try {
      return await this.pool.request({ method, path: this.basePath + path, headers: this.headers, body, signal });
    } catch (error) {
      if (signal.aborted) throw error;
      throw new EngineFailure('engine_unavailable', `engine at ${this.url} could not be reached: ${(error as Error).message}`, { cause: error });
    }
  }

  /** A JSON POST off the jobs' path (adapter loads); the answer's status and text, whatever the status. */
  private async postJson(path: string, body: unknown): Promise<{ status: number; body: string }> {
    const response = await this.send('POST', path, Buffer.from(JSON.stringify(body)), AbortSignal.timeout(LORA_CALL_TIMEOUT_MS));
    return { status: response.statusCode, body: (await readBody(response)).toString('utf8') };
  }

  private async scrapeSignals(path: string): Promise<EngineSignalsRead> {
    const timeoutMs = this.options.metricsTimeoutMs ?? Math.min(this.options.connectTimeoutMs, METRICS_TIMEOUT_MS);
    const signal = AbortSignal.timeout(timeoutMs);
    try {
      const response = await this.pool.request({ method: 'GET', path, headers: { ...this.headers, accept: METRICS_ACCEPT }, signal });
      if (response.statusCode !== 200) {
        await response.body.dump();
        return null;
      }
      const parts: Buffer[] = [];
      let size = 0;
      for await (const part of response.body as AsyncIterable<Buffer>) {
        size += part.length;
        if (size > MAX_METRICS_BYTES) {
          response.body.destroy();
          return null;
        }
        parts.push(part);
      }
      const text = Buffer.concat(parts).toString('utf8');
      if (this.loras) {
        const info = parseLoraRequestsInfo(text);
        if (info) this.loras.observe(info);
      }
      return this.metrics.read(text);
    } catch {
      return null;
    }
  }

  private async listModels(signal: AbortSignal): Promise<string[]> {
    const response = await this.send('GET', '/v1/models', undefined, signal);
    const body = await readBody(response);
    if (response.statusCode >= 400) throw new Error(`GET /v1/models answered ${response.statusCode}`);
    const data = (parseJsonText(body) as { data?: Array<{ id?: unknown; owned_by?: unknown }> }).data ?? [];
    this.llamaServer = data.some((model) => model.owned_by === LLAMA_SERVER_OWNER);
    this.flavour = data.some((model) => model.owned_by === SGLANG_OWNER) ? 'sglang' : 'vllm';
    return data.map((model) => model.id).filter((id): id is string => typeof id === 'string');
  }
}

async function readBody(response: Dispatcher.ResponseData): Promise<Buffer> {
  return Buffer.from(await response.body.arrayBuffer());
}
