import type { AgentConnection } from '../dispatch/agent-connection';
import { holdingsOf, NO_ADAPTERS, type AdapterHoldings } from '../placement/adapter-residency';

/** What a server publishes of a replica's adapters (server-registry.ts `ReplicaLoad`), as read back from a peer's row. */
export interface PublishedAdapters {
  readonly maxLoras?: number;
  readonly maxCpuLoras?: number;
  readonly adapters?: { readonly gpu: readonly unknown[]; readonly cpu: readonly unknown[]; readonly loading: readonly unknown[] };
}

/** Each heartbeat's holdings, made once: the router reads them on every adapter job, the registry once a second. */
const byHeartbeat = new WeakMap<object, AdapterHoldings>();

/** The adapters one of this server's replicas holds, as its latest heartbeat reported them (bounded by its Hello's slots). */
export function connectionAdapters(connection: AgentConnection): AdapterHoldings {
  const heartbeat = connection.heartbeat;
  if (!heartbeat || connection.maxLoras <= 0) return NO_ADAPTERS;
  let holdings = byHeartbeat.get(heartbeat);
  if (!holdings) {
    holdings = holdingsOf(heartbeat.adapters, connection.maxLoras, connection.maxCpuLoras);
    byHeartbeat.set(heartbeat, holdings);
  }
  return holdings;
}

/**
 * A peer's replica's adapters from its registry row. The row is another server's JSON: anything
 * but lists of names (an older or broken peer) reads as holding nothing, and the lists are cut
 * to the replica's slots as a heartbeat's are.
 */
export function peerReplicaAdapters(replica: PublishedAdapters): AdapterHoldings {
  const maxLoras = replica.maxLoras ?? 0;
  if (maxLoras <= 0 || !replica.adapters) return NO_ADAPTERS;
  const { gpu, cpu, loading } = replica.adapters;
  const names = (list: unknown, max: number): string[] =>
    Array.isArray(list) ? list.filter((name): name is string => typeof name === 'string').slice(0, max) : [];
  const ready = names(gpu, maxLoras);
  return { gpu: ready, loading: names(loading, maxLoras - ready.length), cpu: names(cpu, Math.max(0, replica.maxCpuLoras ?? 0)) };
}
