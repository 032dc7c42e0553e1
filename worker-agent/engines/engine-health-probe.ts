/**
 * Periodic engine health: STARTING until the first probe answers, then HEALTHY or UNHEALTHY
 * from the latest probe. The agent reports it in every heartbeat; the control plane decides
 * what an unhealthy engine means for routing.
 */
import type { EngineHealthReport } from './engine';

/** Returns the model names the engine serves; throws when the engine is not usable. */
export type HealthCheck = (signal: AbortSignal) => Promise<readonly string[]>;

export class EngineHealthProbe {
  private report: EngineHealthReport = { status: 'ENGINE_HEALTH_STARTING', detail: 'not probed yet' };
  private served: readonly string[] = [];
  private timer: NodeJS.Timeout | undefined;

  /** @param onHealthy told after every probe the engine answered (the engine's first answer ends its start-up's load phase) */
  constructor(private readonly check: HealthCheck, private readonly intervalMs: number, private readonly timeoutMs: number, private readonly onHealthy: () => void = () => {}) {}

  /** Probes once, then keeps probing in the background (the timer never holds the process open). */
  async start(): Promise<void> {
    await this.probe();
    this.timer = setInterval(() => void this.probe(), this.intervalMs);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
  }

  health(): EngineHealthReport {
    return this.report;
  }

  models(): readonly string[] {
    return this.served;
  }

  private async probe(): Promise<void> {
    try {
      this.served = await this.check(AbortSignal.timeout(this.timeoutMs));
      this.report = { status: 'ENGINE_HEALTH_HEALTHY', detail: '' };
      this.onHealthy();
    } catch (error) {
      this.report = { status: 'ENGINE_HEALTH_UNHEALTHY', detail: `engine probe failed: ${(error as Error).message}` };
    }
  }
}
