import type { AgentConnection } from '../dispatch/agent-connection';
import type { AdapterState } from '../../proto/worker/v1';

/** One replica's hold of an adapter (any revision), as its agent's latest heartbeat says. */
export interface AdapterResidencyRow {
  readonly replicaId: string;
  readonly deploymentId: string;
  readonly revision: number;
  /** `GPU`, `CPU`, `LOADING` or `FAILED`. */
  readonly state: string;
  readonly loadMs: number;
  readonly error: string | null;
  readonly lastUsedAt: Date | null;
}

/**
 * Where an adapter is loaded, read live from the latest heartbeat of this server's agent
 * connections (`Heartbeat.adapters`). Replicas whose agents are connected to another server
 * are not shown: their heartbeats stay on that server (reading them would be a relay call per
 * replica; the routing part's cluster view is where that belongs).
 */
export class AdapterResidency {
  constructor(private readonly connections: { connections(deploymentId?: string): readonly AgentConnection[] }) {}

  of(adapterId: string, deploymentIds: readonly string[]): AdapterResidencyRow[] {
    const prefix = `${adapterId}.r`;
    const rows: AdapterResidencyRow[] = [];
    for (const deploymentId of deploymentIds) {
      for (const connection of this.connections.connections(deploymentId)) {
        for (const held of connection.heartbeat?.adapters ?? []) {
          if (!held.name.startsWith(prefix)) continue;
          const revision = Number(held.name.slice(prefix.length));
          if (!Number.isInteger(revision)) continue;
          rows.push({
            replicaId: connection.replicaId, deploymentId, revision, state: stateName(held.state), loadMs: held.loadMs,
            error: held.error || null, lastUsedAt: held.lastUsedUnixMs ? new Date(Number(held.lastUsedUnixMs)) : null,
          });
        }
      }
    }
    return rows;
  }
}

function stateName(state: AdapterState): string {
  return String(state).replace(/^ADAPTER_STATE_/, '');
}
