import type { Logger } from 'pino';
import type { RequestRecords } from '../requests/request-records';
import type { ClusterNotifier } from '../events/cluster-notifier';
import type { ControlPlaneEvents, ReplicaLoad } from '../events/control-plane-events';

/**
 * Makes the events that happen on one server (a request record's progress or end, a
 * replica's load report) reach the GraphQL subscribers of every server: each is published
 * once on the cluster channel and emitted again on the others. What arrives from a peer is
 * not published back (that would echo between servers forever).
 */
export function bridgeEvents(events: ControlPlaneEvents, notifier: ClusterNotifier, records: Pick<RequestRecords, 'find'>, logger: Logger): void {
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
}
