/**
 * An engine while its model downloads and loads. The agent joins the control plane before
 * the load is done, so a deployment's first replica shows how far it is (`STARTING`, the stage
 * and a percentage on every heartbeat) instead of sitting silently in Creating for minutes.
 * Once the inner engine has started, every call goes straight to it.
 */
import type { AgentEngineKind } from '../../common/engine-kinds';
import type { JobCancellation } from '../job-cancellation';
import type { JobPreemption } from '../job-preemption';
import type { BatchPreemption, Engine, EngineHealthReport, EngineJob, EngineResult, EngineSink, LoadProgress, MediaFiles, MediaJob, ProgressReporter } from './engine';
import { EngineFailure } from './engine-failure';
import type { EngineSignalsAnswer } from './engine-signals';
import type { AdapterResidencyView } from './adapter-slots';
import { StartupPhases } from '../startup-phases';

export class LoadingEngine implements Engine {
  private loaded = false;
  private percent = 0;
  private stage = 'starting the engine';

  /**
   * @param onChange told when the whole percentage or the stage changes, and once loaded
   * @param phases where the inner engine times its start-up (sent on heartbeats until ready)
   */
  constructor(private readonly inner: Engine, private readonly onChange: () => void = () => {}, readonly phases: StartupPhases = new StartupPhases()) {}

  get kind(): AgentEngineKind { return this.inner.kind; }
  get version(): string { return this.inner.version; }
  get url(): string { return this.inner.url; }
  get priorityCapable(): boolean { return this.inner.priorityCapable; }
  get batchPreemption(): BatchPreemption | undefined { return this.inner.batchPreemption; }
  get adapters(): AdapterResidencyView | undefined { return this.inner.adapters; }

  async prepare(): Promise<void> {
    await this.inner.prepare?.();
  }

  async start(progress?: LoadProgress): Promise<void> {
    await this.inner.start((percent, stage) => {
      // llama.cpp reports hundreds of fractions; the control plane needs whole steps.
      const whole = Math.max(0, Math.min(99, Math.floor(percent)));
      progress?.(percent, stage);
      if (whole === this.percent && stage === this.stage) return;
      this.percent = whole;
      this.stage = stage;
      this.onChange();
    }, this.phases);
    this.loaded = true;
    this.onChange();
  }

  models(): readonly string[] {
    return this.inner.models();
  }

  health(): EngineHealthReport {
    if (this.loaded) return this.inner.health();
    return { status: 'ENGINE_HEALTH_STARTING', detail: `${this.stage}: ${this.percent} %`, loadPercent: this.percent };
  }

  /** None while loading: the engine's numbers mean something once it serves. */
  signals(): EngineSignalsAnswer {
    if (!this.loaded) return null;
    return this.inner.signals?.() ?? null;
  }

  async run(job: EngineJob, sink: EngineSink, cancellation: JobCancellation, preemption?: JobPreemption): Promise<EngineResult> {
    // The control plane sends no work before the first ready heartbeat; this guards the protocol.
    if (!this.loaded) throw new EngineFailure('engine_unavailable', `the engine is still starting (${this.stage}: ${this.percent} %)`);
    return await this.inner.run(job, sink, cancellation, preemption);
  }

  get generateMedia(): Engine['generateMedia'] {
    const generate = this.inner.generateMedia?.bind(this.inner);
    if (!generate) return undefined;
    return async (job: MediaJob, progress: ProgressReporter, cancellation: JobCancellation): Promise<MediaFiles> => {
      if (!this.loaded) throw new EngineFailure('engine_unavailable', `the engine is still starting (${this.stage}: ${this.percent} %)`);
      return await generate(job, progress, cancellation);
    };
  }

  async close(): Promise<void> {
    await this.inner.close();
  }
}
