/**
 * Replicas that never become ready. A replica placed more than `deadlineMs` ago whose engine has
 * not once reported ready is ended as a start failure (`deadline`), saying which start-up phase
 * it stuck in; agents that exit while starting and pods their provider gives up on are counted
 * the same way (ReplicaManager.startFailed). Each failure in a row since the deployment's last
 * ready replica doubles the wait before placement tries again, from `backoffBaseMs` up to
 * `backoffMaxMs`: a model that cannot start does not churn through replicas (and their GPU
 * minutes). After a failure its provider reported, the provider's own back-off applies instead. The count is read from the replicas' rows, so any server's capacity loop (one at a
 * time holds its lock) sees the same back-off.
 */
import type { DataSource } from 'typeorm';
import type { Deployment } from '../deployments/deployment.entity';
import type { ReplicaManager } from './replica-manager';
import type { Replica, StartFailureReason } from './replica.entity';

export interface StartWatchdogOptions {
  /** A replica not ready this long after its placement is replaced. */
  readonly deadlineMs: number;
  /** The wait after the first start failure in a row; doubles with each further one. */
  readonly backoffBaseMs: number;
  readonly backoffMaxMs: number;
}

/** The wait before the next replica after `failures` start failures in a row (1 → base). */
export function startBackoffMs(failures: number, baseMs: number, maxMs: number): number {
  if (failures <= 0) return 0;
  return Math.min(maxMs, baseMs * 2 ** Math.min(failures - 1, 30));
}

const REASON_WORDS: Record<StartFailureReason, string> = {
  deadline: 'never ready within the start-up deadline',
  exited: 'its agent exited while starting',
  provider_failed: 'its provider could not start it',
};

export class ReplicaStartWatchdog {
  constructor(
    private readonly dataSource: DataSource,
    private readonly replicas: Pick<ReplicaManager, 'listActive' | 'startFailed'>,
    private readonly options: StartWatchdogOptions,
    /** The clock replicas' ages are measured by. @default Date.now */
    private readonly now: () => number = Date.now,
  ) {}

  /** Ends the deployment's replicas that missed the start-up deadline; how many. */
  async check(deployment: Deployment): Promise<number> {
    const cutoff = this.now() - this.options.deadlineMs;
    let ended = 0;
    for (const replica of await this.replicas.listActive(deployment.id)) {
      if (replica.startedAt || replica.createdAt.getTime() > cutoff) continue;
      if (await this.replicas.startFailed(replica.id, 'deadline', this.deadlineMessage(replica))) ended += 1;
    }
    return ended;
  }

  /**
   * Why the deployment waits before its next replica: its start failures in a row (since its
   * last replica that became ready), the last one's reason, and when the next try is. Null when
   * the back-off is over or there is none. The text changes only with a new failure, so a
   * status reason built of it is not rewritten on every capacity pass.
   */
  async holdReason(deploymentId: string): Promise<string | null> {
    const [row] = await this.dataSource.query(`
      SELECT count(*)::int AS failures,
        (array_agg(start_failure ORDER BY terminated_at DESC))[1] AS reason,
        max(terminated_at) AS last_at,
        (EXTRACT(EPOCH FROM statement_timestamp() - max(terminated_at)) * 1000)::float8 AS since_ms
      FROM replicas
      WHERE deployment_id = $1 AND start_failure IS NOT NULL
        AND terminated_at > COALESCE((SELECT max(started_at) FROM replicas WHERE deployment_id = $1), '-infinity')`, [deploymentId]);
    const failures = Number(row?.failures ?? 0);
    // A provider that gave up on its replica has its own back-off (Kubernetes: failureBackoffSeconds): it governs.
    if (failures === 0 || row.reason === 'provider_failed') return null;
    const waitMs = startBackoffMs(failures, this.options.backoffBaseMs, this.options.backoffMaxMs);
    if (Number(row.since_ms) >= waitMs) return null;
    const nextAt = new Date(new Date(row.last_at).getTime() + waitMs);
    return `${failures} replica start${failures === 1 ? '' : 's'} failed in a row (last: ${REASON_WORDS[row.reason as StartFailureReason] ?? row.reason}); `
      + `next try at ${nextAt.toISOString()}, after a ${formatSeconds(waitMs)} back-off`;
  }

  /** What the ended replica says: the deadline, and the phase it stuck in (from its agent's last report). */
  private deadlineMessage(replica: Replica): string {
    const deadline = formatSeconds(this.options.deadlineMs);
    const agentPhases = replica.startupPhases.filter((phase) => phase.name !== 'provision');
    const stuck = agentPhases.find((phase) => !phase.done) ?? agentPhases.at(-1);
    let where: string;
    if (!replica.agentId) where = 'its agent never said Hello';
    else if (!stuck) where = `its agent reported no start-up phase${replica.statusReason ? `; last: ${replica.statusReason}` : ''}`;
    else if (stuck.done) where = `its last phase, ${stuck.name}, ended; last: ${replica.statusReason ?? 'no ready heartbeat'}`;
    else {
      // Its stored duration is as of the last write; the phase has run on since it began.
      const runningMs = Math.max(stuck.durationMs, this.now() - Date.parse(stuck.startedAt));
      where = `stuck in ${stuck.name} after ${formatSeconds(runningMs)}${stuck.detail ? ` (${stuck.detail})` : ''}`;
    }
    return `never became ready within ${deadline} of its placement: ${where}; replaced`;
  }
}

function formatSeconds(milliseconds: number): string {
  const seconds = milliseconds / 1000;
  return `${seconds < 10 ? Number(seconds.toFixed(1)) : Math.round(seconds)} s`;
}
