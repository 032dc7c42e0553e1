import type { DataSource } from 'typeorm';
import type { Dispatcher } from '../dispatch/dispatcher';
import type { MetricsOptions, QueueDepth, ReplicaCount } from './metrics';
import { withTimeout } from './with-timeout';

/**
 * The scrape-time sources of `inference_queue_depth` and `inference_replicas`. Queued request
 * records and replica rows are read from PostgreSQL, so every server reports the same
 * cluster-wide numbers for them; the agent backlog is what this server's agents carry.
 */
export function controlPlaneGauges(dataSource: DataSource, dispatcher: Dispatcher, timeoutMs = 2_000): Pick<MetricsOptions, 'queueDepth' | 'replicas'> {
  return {
    async queueDepth(): Promise<QueueDepth[]> {
      const depth = new Map<string, number>();
      // Jobs assigned beyond an agent's concurrency wait in its local FIFO.
      for (const connection of dispatcher.connections()) {
        const waiting = Math.max(0, connection.inFlight - connection.maxConcurrency);
        depth.set(connection.deploymentId, (depth.get(connection.deploymentId) ?? 0) + waiting);
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
