import type { DataSource } from 'typeorm';
import type { Dispatcher } from '../dispatch/dispatcher';
import { engineLoadOf } from '../dispatch/engine-load';
import type { InFlight, MetricsOptions, QueueDepth, ReplicaCount, ReplicaEngineLoad } from './metrics';
import { withTimeout } from './with-timeout';

/**
 * The scrape-time sources of `inference_in_flight`, `inference_queue_depth`, `inference_replicas`
 * and the `inference_replica_*` engine gauges. Queued request records and replica rows are read
 * from PostgreSQL, so every server reports the same cluster-wide numbers for them; the agent
 * backlog and the engine signals are what this server's agents carry.
 */
export function controlPlaneGauges(dataSource: DataSource, dispatcher: Dispatcher, timeoutMs = 2_000): Pick<MetricsOptions, 'queueDepth' | 'replicas' | 'inFlight' | 'replicaEngines'> {
  return {
    /** From the latest heartbeat of each ready replica whose engine reports signals. */
    async replicaEngines(): Promise<ReplicaEngineLoad[]> {
      const rows: ReplicaEngineLoad[] = [];
      for (const connection of dispatcher.connections()) {
        if (connection.closed || !connection.engineSignals) continue;
        const load = engineLoadOf(connection.engineSignals);
        rows.push({
          deployment: connection.deploymentId, replica: connection.replicaId, running: load.engineRunning ?? 0,
          waiting: load.engineWaiting ?? 0, kvCacheUsage: load.kvCacheUsage ?? 0, prefixCacheHitRate: load.prefixCacheHitRate,
        });
      }
      return rows;
    },

    /** Owner, guest and batch work apart: what docs/shared-serving.md asks a shared pool to show, and what docs/batches.md says batches take. */
    async inFlight(): Promise<InFlight[]> {
      const counts = new Map<string, { owner: number; guest: number; batch: number }>();
      for (const connection of dispatcher.connections()) {
        const count = counts.get(connection.deploymentId) ?? { owner: 0, guest: 0, batch: 0 };
        count.owner += connection.inFlight - connection.guestInFlight - connection.batchInFlight;
        count.guest += connection.guestInFlight;
        count.batch += connection.batchInFlight;
        counts.set(connection.deploymentId, count);
      }
      return [...counts].flatMap(([deployment, count]) => [
        { deployment, class: 'owner' as const, count: count.owner }, { deployment, class: 'guest' as const, count: count.guest },
        { deployment, class: 'batch' as const, count: count.batch },
      ]);
    },

    async queueDepth(): Promise<QueueDepth[]> {
      const depth = new Map<string, number>();
      // Jobs assigned beyond an agent's concurrency wait in its local FIFO (batch lines it set aside do not).
      for (const connection of dispatcher.connections()) {
        depth.set(connection.deploymentId, (depth.get(connection.deploymentId) ?? 0) + connection.waiting);
      }
      const rows: Array<{ deployment_id: string; depth: number }> = await withTimeout(dataSource.query(
        `SELECT deployment_id, count(*)::int AS depth FROM request_records WHERE status = 'queued' GROUP BY deployment_id`,
      ), timeoutMs, 'the queued request count');
      for (const row of rows) depth.set(row.deployment_id, (depth.get(row.deployment_id) ?? 0) + row.depth);
      return [...depth].map(([deployment, waiting]) => ({ deployment, depth: waiting }));
    },

    async replicas(): Promise<ReplicaCount[]> {
      const rows: Array<{ deployment_id: string; status: string; count: number }> = await withTimeout(dataSource.query(
        `SELECT deployment_id, status, count(*)::int AS count FROM replicas WHERE status <> 'Terminated' GROUP BY deployment_id, status`,
      ), timeoutMs, 'the replica count');
      return rows.map((row) => ({ deployment: row.deployment_id, state: row.status, count: row.count }));
    },
  };
}
