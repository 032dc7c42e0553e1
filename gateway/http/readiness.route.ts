import type { Context, Next } from 'koa';
import type { Logger } from 'pino';
import type { ReadinessProbe } from '../../control-plane/api/startup';

export interface ReadinessReport {
  ready: boolean;
  body: {
    status: 'ready' | 'not_ready'; not_ready?: string[];
    checks: Record<string, 'ok' | 'failing' | 'degraded' | 'shutting_down'>;
    /** Advisory probes that fail, with why: the server still takes traffic. */
    degraded?: Record<string, string>;
  };
}

/**
 * Whether this server should get traffic: every probe passes and it is not shutting down.
 * Concurrent `/readyz` calls share one run of the probes; a change of state is logged once
 * (with the probes' errors), not on every poll of a load balancer.
 */
export class Readiness {
  private shuttingDown = false;
  private running: Promise<ReadinessReport> | null = null;
  private lastNotReady = '';

  constructor(private readonly probes: readonly ReadinessProbe[], private readonly logger: Logger) {}

  /** From now on the server reports not ready, so load balancers stop sending it requests while it drains. */
  beginShutdown(): void {
    this.shuttingDown = true;
  }

  report(): Promise<ReadinessReport> {
    this.running ??= this.run().finally(() => {
      this.running = null;
    });
    return this.running;
  }

  private async run(): Promise<ReadinessReport> {
    // While shutting down the probes would only race the database being closed.
    if (this.shuttingDown) return { ready: false, body: { status: 'not_ready', not_ready: ['shutdown'], checks: { shutdown: 'shutting_down' } } };
    const checks: ReadinessReport['body']['checks'] = {};
    const errors: Record<string, string> = {};
    const degraded: Record<string, string> = {};
    await Promise.all(this.probes.map(async (probe) => {
      try {
        await probe.check();
        checks[probe.name] = 'ok';
      } catch (error) {
        const message = error instanceof Error ? error.message : String(error);
        checks[probe.name] = probe.advisory ? 'degraded' : 'failing';
        (probe.advisory ? degraded : errors)[probe.name] = message;
      }
    }));
    checks.shutdown = 'ok';
    const notReady = Object.keys(errors).sort();
    this.logTransition([...notReady, ...Object.keys(degraded).map((name) => `${name} (degraded)`)].sort(), { ...errors, ...degraded });
    const extra = Object.keys(degraded).length > 0 ? { degraded } : {};
    if (notReady.length === 0) return { ready: true, body: { status: 'ready', checks, ...extra } };
    return { ready: false, body: { status: 'not_ready', not_ready: notReady, checks, ...extra } };
  }

  private logTransition(notReady: string[], errors: Record<string, string>): void {
    const key = notReady.join(',');
    if (key === this.lastNotReady) return;
    this.lastNotReady = key;
    if (notReady.length === 0) this.logger.info('ready again: every readiness probe passes');
    else this.logger.warn({ notReady, errors }, 'not ready');
  }
}

/**
 * `GET /readyz`: 200 when ready, 503 naming what is not. The probes' error messages are
 * logged, not returned: the endpoint has no authentication and they may name hosts.
 */
export function readinessRoute(readiness: Readiness) {
  return async (context: Context, next: Next): Promise<void> => {
    if (context.path !== '/readyz') return await next();
    const report = await readiness.report();
    context.status = report.ready ? 200 : 503;
    context.set('cache-control', 'no-store');
    context.body = report.body;
  };
}
