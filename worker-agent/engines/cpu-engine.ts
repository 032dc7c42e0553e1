/**
 * The built-in engine that needs no weights: deterministic text from prompt and seed, with
 * real token counts. In-process it produces the same SSE bytes its HTTP server would, and the
 * agent forwards them through the same filter as any HTTP engine's.
 */
import type { JobCancellation } from '../job-cancellation';
import type { JobPreemption } from '../job-preemption';
import type { Engine, EngineHealthReport, EngineJob, EngineResult, EngineSink, LoadProgress, MediaFiles, MediaJob, ProgressReporter } from './engine';
import { generateCpuMedia } from './cpu-media';
import { DEFAULT_CPU_ENGINE_OPTIONS, type CpuEngineOptions } from './cpu-engine-options';
import { cpuEmbeddings } from './cpu-embeddings';
import { cacheTenantOf } from './cache-tenant';
import { planCpuCompletion } from './cpu-request';
import { cpuEventStream, cpuResponseBody } from './cpu-response';
import { forwardEventStream, forwardJsonBody } from './engine-response';
import { prepareEngineRequest } from './engine-request';
import type { EngineSignals } from './engine-signals';
import { cpuPrefixSimulator, type CpuPrefixSimulator } from './cpu-prefix-cache';
import { CpuAdapters, withAdapter, type CpuAdapterOptions } from './cpu-adapters';
import type { AdapterResidencyView } from './adapter-slots';
import { adapterLoadFailed } from './adapter-failure';
import { actOutStartup, legacyLoadPlan } from './cpu-startup';
import type { StartupPhases } from '../startup-phases';

export const CPU_ENGINE_VERSION = '1.0.0';

const HEALTHY: EngineHealthReport = Object.freeze({ status: 'ENGINE_HEALTH_HEALTHY', detail: '' });

export class CpuEngine implements Engine {
  readonly kind = 'cpu';
  readonly version = CPU_ENGINE_VERSION;
  readonly url = '';
  readonly priorityCapable = true;
  /** Batch lines pause between steps (cpu-response.ts); a resume costs the time to first token again. */
  readonly batchPreemption = 'suspend';

  /** Engine calls running now (text and media), prefills waiting for the lane included. */
  private running = 0;
  /** The simulated prefix cache and prefill lane; none unless prefillMicrosPerToken or prefixCacheTokens is set. */
  private readonly prefix: CpuPrefixSimulator | undefined;

  /**
   * @param engineModel the name the engine knows its model by (WORKER_ENGINE_MODEL): what its
   * embeddings are drawn from, as a real engine's come from its weights. Answers carry the job's
   * catalog model whatever it is, as the openai engine's do (issue 35).
   */
  /** Simulated LoRA adapters (cpu-adapters.ts); absent when the agent serves none. */
  readonly loras: CpuAdapters | undefined;

  /**
   * @param adapters the simulated adapter slots and load time; absent or `maxLoras` 0: no adapters
   */
  constructor(private readonly options: CpuEngineOptions = DEFAULT_CPU_ENGINE_OPTIONS, private readonly engineModel?: string, adapters?: CpuAdapterOptions) {
    this.prefix = cpuPrefixSimulator(options);
    this.loras = adapters && adapters.capacity.maxLoras > 0 ? new CpuAdapters(adapters) : undefined;
  }

  get adapters(): AdapterResidencyView | undefined {
    return this.loras?.slots;
  }

  /**
   * With `startup` (or `loadMs`), behaves like an engine fetching, loading and warming up its
   * weights: 20 steps of progress, each phase timed (cpu-startup.ts). Without: ready at once.
   */
  async start(progress?: LoadProgress, phases?: StartupPhases): Promise<void> {
    await actOutStartup(this.options.startup ?? legacyLoadPlan(this.options.loadMs ?? 0), progress, phases);
  }

  /** Serves any model name, so it reports none. */
  models(): readonly string[] {
    return [];
  }

  health(): EngineHealthReport {
    return HEALTHY;
  }

  /**
   * Its own state: every call it is given runs at once, so none waits in the engine (jobs
   * beyond the agent's concurrency wait in the agent's queue, `Heartbeat.queued`), except,
   * with the simulated prefill, requests whose prefill waits for the lane.
   */
  signals(): EngineSignals {
    const waiting = this.prefix?.waiting ?? 0;
    return { running: this.running - waiting, waiting, ...this.cacheSignals() };
  }

  /**
   * KV-cache use and prefix-cache hit rate: none without weights, so 0 and 0; the simulated
   * prefix cache (cpu-prefix-cache.ts) reports blocks held / capacity and its recent hit rate.
   */
  protected cacheSignals(): Pick<EngineSignals, 'kvCacheUsage' | 'prefixCacheHitRate'> {
    return this.prefix?.signals() ?? { kvCacheUsage: 0, prefixCacheHitRate: 0 };
  }

  async run(job: EngineJob, sink: EngineSink, cancellation: JobCancellation, preemption?: JobPreemption): Promise<EngineResult> {
    this.running++;
    try {
      return await this.runText(job, sink, cancellation, preemption);
    } finally {
      this.running--;
    }
  }

  private async runText(job: EngineJob, sink: EngineSink, cancellation: JobCancellation, preemption?: JobPreemption): Promise<EngineResult> {
    const signal = cancellation.signal;
    // The catalog model goes into the plan, so the answers are written with it: nothing to rename.
    const request = prepareEngineRequest(job, undefined);
    if (request.path === '/v1/embeddings') {
      const answer = cpuEmbeddings(request.payload, job.embedding, this.engineModel ?? job.model, job.model);
      await sink.output(answer.body, 'application/json');
      return { usage: answer.usage, finishReason: '', usageEstimated: false };
    }
    if (!job.adapter) return await this.complete(job, request.payload, request.path, sink, signal, preemption);
    if (!this.loras) throw adapterLoadFailed('invalid', 'this replica serves no adapters (max_loras is 0)');
    const lease = await this.loras.acquire(job.adapter);
    try {
      withAdapter(request.payload, job.adapter);
      return await this.complete(job, request.payload, request.path, sink, signal, preemption);
    } finally {
      lease.release();
    }
  }

  private async complete(
    job: EngineJob, payload: Record<string, unknown>, path: '/v1/chat/completions' | '/v1/completions', sink: EngineSink, signal: AbortSignal, preemption?: JobPreemption,
  ): Promise<EngineResult> {
    const plan = planCpuCompletion(payload, path, this.options, cacheTenantOf(job));
    const promptText = () => plan.promptText;
    if (plan.stream) return await forwardEventStream(cpuEventStream(plan, signal, this.prefix), sink, job.includeUsage, promptText);
    return await forwardJsonBody(await cpuResponseBody(plan, signal, this.prefix, preemption), sink, promptText);
  }

  async generateMedia(job: MediaJob, progress: ProgressReporter, cancellation: JobCancellation): Promise<MediaFiles> {
    this.running++;
    try {
      return await generateCpuMedia(job, progress, cancellation, this.options.testControls);
    } finally {
      this.running--;
    }
  }

  async close(): Promise<void> {
    await this.loras?.slots.close();
  }
}
