/**
 * Replicas' cold starts on /metrics: how long each start-up phase took (provision, download,
 * load, warm_up: docs/autoscaling.md#cold-starts) and the whole start, once a replica is ready;
 * and the replicas that never became ready, by deployment and reason. Recorded by the server
 * whose agent stream saw the replica ready (or that ended it), so a sum over servers counts each
 * start once. A replica start is rare: prom-client's own labelled children are cheap enough here.
 */
import { Counter, Histogram, type Registry } from 'prom-client';
import type { StartupListener } from '../replicas/replica-manager';
import type { Replica, StartFailureReason } from '../replicas/replica.entity';

/** From a CPU engine's milliseconds to a large model's half hour. */
const STARTUP_BUCKETS = [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 90, 120, 180, 300, 600, 1200, 1800];
const PHASE_NAME = /^[a-z][a-z_]{0,31}$/;

export class StartupMetrics implements StartupListener {
  private readonly phases: Histogram<'phase'>;
  private readonly total: Histogram<'provider'>;
  private readonly failures: Counter<'deployment' | 'reason'>;

  constructor(registry: Registry) {
    const registers = [registry];
    this.phases = new Histogram({
      name: 'inference_replica_startup_phase_seconds',
      help: 'How long each phase of a replica\'s start-up took (provision: placement to its agent\'s Hello; download, load, warm_up: as its agent timed them), recorded once the replica is ready.',
      labelNames: ['phase'], buckets: STARTUP_BUCKETS, registers,
    });
    this.total = new Histogram({
      name: 'inference_replica_startup_seconds',
      help: 'A replica\'s cold start: from its placement until its engine first reported ready, by provider.',
      labelNames: ['provider'], buckets: STARTUP_BUCKETS, registers,
    });
    this.failures = new Counter({
      name: 'inference_replica_start_failures_total',
      help: 'Replicas replaced because they never became ready, by deployment and reason (deadline, exited, provider_failed).',
      labelNames: ['deployment', 'reason'], registers,
    });
  }

  ready(replica: Replica): void {
    for (const phase of replica.startupPhases) {
      if (phase.done && PHASE_NAME.test(phase.name)) this.phases.observe({ phase: phase.name }, phase.durationMs / 1000);
    }
    if (replica.startedAt) this.total.observe({ provider: replica.provider }, Math.max(0, replica.startedAt.getTime() - replica.createdAt.getTime()) / 1000);
  }

  startFailed(replica: Replica, reason: StartFailureReason): void {
    this.failures.inc({ deployment: replica.deploymentId, reason });
  }
}
