import type { AgentConnection } from '../dispatch/agent-connection';
import type { Peer } from '../cluster/server-registry';
import { peerReplicaAdapters } from '../cluster/replica-adapters';
import type { AdapterState } from '../../proto/worker/v1';

/** One replica's hold of an adapter (any revision), as its agent's latest heartbeat says. */
export interface AdapterResidencyRow {
  readonly replicaId: string;
  readonly deploymentId: string;
  /** The server whose agent connection reported it (this one, or a peer through its registry row). */
  readonly serverId: string;
  readonly revision: number;
  /** `GPU`, `CPU`, `LOADING` or `FAILED` (a peer's row carries no failures). */
  readonly state: string;
  /** Null for a replica of a peer: its row carries states only. */
  readonly loadMs: number | null;
  readonly error: string | null;
  readonly lastUsedAt: Date | null;
}

/**
 * Where an adapter is loaded: the latest heartbeat of this server's agent connections
 * (`Heartbeat.adapters`: state, load time, error, last use), then the replicas of every other
 * server as its registry row publishes them (cluster/replica-adapters.ts: state only, at most a
 * registry heartbeat old, bounded by each replica's slots). A replica seen both ways (its agent
 * just moved) is shown once, from here.
 */
export class AdapterResidency {
  constructor(
    private readonly connections: { connections(deploymentId?: string): readonly AgentConnection[] },
    private readonly serverId: string,
    private readonly peers: () => readonly Peer[] = () => [],
  ) {}

  of(adapterId: string, deploymentIds: readonly string[]): AdapterResidencyRow[] {
    const prefix = `${adapterId}.r`;
    const revisionOf = (name: string): number | null => {
      if (!name.startsWith(prefix)) return null;
      const revision = Number(name.slice(prefix.length));
      return Number.isInteger(revision) ? revision : null;
    };
    const rows: AdapterResidencyRow[] = [];
    const seen = new Set<string>();
    for (const deploymentId of deploymentIds) {
      for (const connection of this.connections.connections(deploymentId)) {
        seen.add(connection.replicaId);
        for (const held of connection.heartbeat?.adapters ?? []) {
          const revision = revisionOf(held.name);
          if (revision === null) continue;
          rows.push({
            replicaId: connection.replicaId, deploymentId, serverId: this.serverId, revision, state: stateName(held.state), loadMs: held.loadMs,
            error: held.error || null, lastUsedAt: held.lastUsedUnixMs ? new Date(Number(held.lastUsedUnixMs)) : null,
          });
        }
      }
    }
    for (const peer of this.peers()) {
      for (const deploymentId of deploymentIds) {
        for (const replica of peer.load[deploymentId]?.replicas ?? []) {
          if (typeof replica.id !== 'string' || seen.has(replica.id)) continue;
          seen.add(replica.id);
          const holdings = peerReplicaAdapters(replica);
          for (const [state, names] of [['GPU', holdings.gpu], ['LOADING', holdings.loading], ['CPU', holdings.cpu]] as const) {
            for (const name of names) {
              const revision = revisionOf(name);
              if (revision === null) continue;
              rows.push({ replicaId: replica.id, deploymentId, serverId: peer.id, revision, state, loadMs: null, error: null, lastUsedAt: null });
            }
          }
        }
      }
    }
    return rows;
  }
}

function stateName(state: AdapterState): string {
  return String(state).replace(/^ADAPTER_STATE_/, '');
}
