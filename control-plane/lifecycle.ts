import type { Logger } from 'pino';

/**
 * The stop functions of started components, run in reverse start order: what started last
 * (agents) stops first, what everything depends on (the database listener) stops last. Start-up
 * that fails half-way stops what it had started, so a failed boot leaves no process behind.
 */
export class Lifecycle {
  private readonly stops: Array<{ name: string; stop: () => Promise<void> | void }> = [];

  constructor(private readonly logger: Logger) {}

  add(name: string, stop: () => Promise<void> | void): void {
    this.stops.push({ name, stop });
  }

  async stopAll(): Promise<void> {
    while (this.stops.length > 0) {
      const { name, stop } = this.stops.pop()!;
      try {
        await stop();
      } catch (error) {
        this.logger.error({ err: error, component: name }, 'component failed to stop cleanly');
      }
    }
  }
}
