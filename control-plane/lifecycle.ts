import type { Logger } from 'pino';

/** A component that has not stopped in this long is left behind, so the rest still stops. */
export const DEFAULT_STOP_STEP_TIMEOUT_MS = 15_000;

/**
 * The stop functions of started components, run in reverse start order: what started last
 * (agents) stops first, what everything depends on (the database listener) stops last. Start-up
 * that fails half-way stops what it had started, so a failed boot leaves no process behind.
 *
 * Each step has a deadline: one component whose stop never settles (a connection that hangs
 * while closing) must not keep the process from stopping the others and exiting. The one that
 * overran is named in the log and as a process warning (seen even where logs are silenced).
 */
export class Lifecycle {
  private readonly stops: Array<{ name: string; stop: () => Promise<void> | void }> = [];

  constructor(private readonly logger: Logger, private readonly stepTimeoutMs = DEFAULT_STOP_STEP_TIMEOUT_MS) {}

  add(name: string, stop: () => Promise<void> | void): void {
    this.stops.push({ name, stop });
  }

  async stopAll(): Promise<void> {
    while (this.stops.length > 0) {
      const { name, stop } = this.stops.pop()!;
      let timer: NodeJS.Timeout | undefined;
      const overran = new Promise<'overran'>((resolve) => {
        timer = setTimeout(() => resolve('overran'), this.stepTimeoutMs);
      });
      try {
        const outcome = await Promise.race([Promise.resolve().then(stop), overran]);
        if (outcome === 'overran') {
          this.logger.error({ component: name, timeoutMs: this.stepTimeoutMs }, 'component did not stop in time; stopping the others');
          process.emitWarning(`${name} did not stop within ${this.stepTimeoutMs} ms; stopping the others`, 'LifecycleWarning');
        }
      } catch (error) {
        this.logger.error({ err: error, component: name }, 'component failed to stop cleanly');
      } finally {
        clearTimeout(timer);
      }
    }
  }
}
