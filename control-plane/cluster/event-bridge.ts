import type { Logger } from 'pino';
import type { RequestRecords } from '../requests/request-records';
import type { ClusterNotifier } from '../events/cluster-notifier';
import type { ControlPlaneEvents, ReplicaLoad } from '../events/control-plane-events';
import type { ReplicaLogLine, ReplicaLogs } from '../replicas/replica-logs';

/**
 * Makes the events that happen on one server (a request record's progress or end, a
 * replica's load report, a line its agent printed) reach the GraphQL subscribers of every
 * server: each is published once on the cluster channel and emitted again on the others. What
 * arrives from a peer is not published back (that would echo between servers forever). A
 * replica's log line is also kept by every server (`ReplicaLogs.mirror`), so the backlog a
 * console asks for is there whichever server it reaches.
 */
export function bridgeEvents(
  events: ControlPlaneEvents, notifier: ClusterNotifier, records: Pick<RequestRecords, 'find'>, logger: Logger, replicaLogs: Pick<ReplicaLogs, 'mirror'>,
): void {
  const fromPeers = new WeakSet<object>();

  events.on('requestUpdated', (record) => {
    if (!fromPeers.has(record)) notifier.publish('request', record.id);
  });
  notifier.on('request', (id) => {
    records.find(id).then((record) => {
      if (!record) return;
      fromPeers.add(record);
      events.emit('requestUpdated', record);
    }, (error) => logger.warn({ err: error, requestId: id }, 'could not read a request record changed on another server'));
  });

  events.on('replicaLoad', (load) => {
    if (!fromPeers.has(load)) notifier.publish('replica-load', JSON.stringify(load));
  });
  notifier.on('replica-load', (payload) => {
    const parsed = JSON.parse(payload) as Omit<ReplicaLoad, 'at'> & { at: string };
    const load: ReplicaLoad = { ...parsed, at: new Date(parsed.at) };
    fromPeers.add(load);
    events.emit('replicaLoad', load);
  });

  // A line is at most a few hundred characters (ReplicaLogs' maxLineChars), far below NOTIFY's
  // 8,000-byte payload limit, and each replica's lines are rate-limited where they are written.
  events.on('replicaLogLine', (line) => {
    if (!fromPeers.has(line)) notifier.publishInOrder('replica-log', JSON.stringify(line));
  });
  notifier.on('replica-log', (payload) => {
    const parsed = JSON.parse(payload) as Omit<ReplicaLogLine, 'at'> & { at: string };
    const line: ReplicaLogLine = { ...parsed, at: new Date(parsed.at) };
    fromPeers.add(line);
    replicaLogs.mirror(line);
  });
}
