import { TableScroll } from './TableScroll';
import { Empty } from './states';

export interface Residency {
  replicaId: string;
  deploymentId: string;
  revision: number;
  state: string;
  /** Null for a replica connected to another server (its registry row carries states only). */
  loadMs: number | null;
  error?: string | null;
  lastUsedAt?: string | null;
}

/** Words for an agent's residency states (proto AdapterResidency.state). */
const STATE_WORDS: Record<string, string> = {
  GPU: 'GPU: ready in the engine', CPU: 'CPU: in host memory', LOADING: 'Loading', FAILED: 'Failed',
};

/**
 * Where an adapter is held, one row per replica, as the agents' latest heartbeats say (a replica
 * connected to another server: its state from that server's registry row, no load time). A FAILED
 * row shows the agent's error; only requests for this adapter failed, the replica kept serving.
 */
export function AdapterResidency({ rows, label, deploymentNames, showAdapter }: {
  rows: ReadonlyArray<Residency & { adapter?: string }>; label: string; deploymentNames?: ReadonlyMap<string, string>; showAdapter?: boolean;
}) {
  if (rows.length === 0) {
    return <Empty>Not held by any replica yet: the first request for it loads it on a replica of an attached deployment.</Empty>;
  }
  return (
    <TableScroll>
      <table aria-label={label}>
        <thead>
          <tr>
            {showAdapter && <th scope="col">Adapter</th>}
            <th scope="col">Replica</th>
            {deploymentNames && <th scope="col">Deployment</th>}
            <th scope="col">State</th><th scope="col">Revision</th><th scope="col">Last load</th><th scope="col">Last used</th>
          </tr>
        </thead>
        <tbody>
          {rows.map((row) => (
            <tr key={`${row.adapter ?? ''}|${row.replicaId}|${row.revision}`}>
              {showAdapter && <td>{row.adapter}</td>}
              <td><code className="id">{row.replicaId}</code></td>
              {deploymentNames && <td>{deploymentNames.get(row.deploymentId) ?? <code className="id">{row.deploymentId}</code>}</td>}
              <td>
                <span className={`status status-adapter-${row.state.toLowerCase()}`}>{STATE_WORDS[row.state] ?? row.state}</span>
                {row.state === 'FAILED' && row.error && <p className="field-error">{row.error}</p>}
              </td>
              <td>r{row.revision}</td>
              <td>{row.state === 'LOADING' ? '…' : row.loadMs === null ? '—' : `${row.loadMs.toLocaleString('en-US')} ms`}</td>
              <td>{row.lastUsedAt ? new Date(row.lastUsedAt).toLocaleTimeString() : '—'}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </TableScroll>
  );
}
