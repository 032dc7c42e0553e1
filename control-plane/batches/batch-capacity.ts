/**
 * What the batch runner reads of a deployment's replicas to start lines only where live traffic
 * leaves room (docs/batches.md).
 */
import type { AgentConnection } from '../dispatch/agent-connection';

/**
 * Live (owner or guest) jobs wait on this replica: more jobs are on it than it runs (beyond
 * the lines it set aside, when it preempts them), or its agent queues some.
 */
export function liveWaiting(connection: AgentConnection): boolean {
  return connection.waiting > 0 || (connection.heartbeat?.queued ?? 0) > 0;
}

/**
 * Lines kept a live request waiting here: live jobs wait, or the replica is full while it
 * serves live jobs (the next live request would wait), and its lines are in the way.
 */
export function linesKeptLiveWaiting(connection: AgentConnection): boolean {
  if (!linesInTheWay(connection)) return false;
  return liveWaiting(connection) || (connection.liveFreeSlots <= 0 && connection.inFlight > connection.batchInFlight);
}

/**
 * Lines here can keep a live job waiting: its agent cannot set them aside. On a replica that
 * preempts them a live job that waits does so behind other live jobs, which fewer lines would
 * not shorten (measured: halving the window there on every live queue left a quarter of the free
 * capacity unused, bench/README.md).
 */
export function linesInTheWay(connection: AgentConnection): boolean {
  return !connection.preemptsBatchLines;
}
