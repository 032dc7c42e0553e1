import { useEffect, useMemo, useState } from 'react';
import { useQuery, useSubscription } from 'urql';
import { graphql } from '../gql';
import { Empty, ErrorView, Loading } from './states';

const BACKLOG = graphql(`
  query ReplicaLogBacklog($deploymentId: ID!) {
    replicaLogs(deploymentId: $deploymentId, limit: 300) { replicaId seq at level source message }
  }
`);

const LINES = graphql(`
  subscription ReplicaLogLines($deploymentId: ID!) {
    replicaLogLine(deploymentId: $deploymentId) { replicaId seq at level source message }
  }
`);

interface Line { replicaId: string; seq: number; at: string; level: string; source: string; message: string }

/** Lines this page keeps, newest last: the backlog and what streamed in since. */
const MAX_LINES = 500;

/**
 * The recent lines of a deployment's replicas, the agent's and the engine's, streamed: the
 * server's backlog first, then every new line as the agent prints it (from whichever server
 * holds it). Shown for one replica (`replicaId`, chosen here or from the Replicas table) or all,
 * and for the agent, the engine or both. Lines arrive scrubbed of addresses, paths and secrets.
 */
export function ReplicaLogs({ deploymentId, replicas, replicaId, onReplica }: {
  deploymentId: string;
  replicas: ReadonlyArray<{ id: string; status: string }>;
  replicaId: string | null;
  onReplica: (replicaId: string | null) => void;
}) {
  const [source, setSource] = useState<'all' | 'agent' | 'engine'>('all');
  const [streamed, setStreamed] = useState<Line[]>([]);
  const [{ data, fetching, error }] = useQuery({ query: BACKLOG, variables: { deploymentId }, requestPolicy: 'network-only' });
  const [live] = useSubscription({ query: LINES, variables: { deploymentId } }, (_previous: unknown, event) => {
    setStreamed((current) => [...current, event.replicaLogLine].slice(-MAX_LINES));
    return event;
  });
  useEffect(() => setStreamed([]), [deploymentId]);

  // A line can come in both (printed while the backlog was read): once, by its replica and number.
  const lines = useMemo(() => {
    const seen = new Set<string>();
    return [...(data?.replicaLogs ?? []), ...streamed].filter((line) => {
      const key = `${line.replicaId}/${line.seq}/${line.at}`;
      if (seen.has(key)) return false;
      seen.add(key);
      return true;
    }).slice(-MAX_LINES);
  }, [data, streamed]);
  const shown = lines.filter((line) => (!replicaId || line.replicaId === replicaId) && (source === 'all' || line.source === source));

  return (
    <div className="replica-logs">
      <div className="filters">
        <div>
          <label htmlFor="log-replica">Replica</label>
          <select id="log-replica" value={replicaId ?? ''} onChange={(event) => onReplica(event.target.value || null)}>
            <option value="">All replicas</option>
            {replicas.map((replica) => <option key={replica.id} value={replica.id}>{replica.id} ({replica.status})</option>)}
          </select>
        </div>
        <div>
          <label htmlFor="log-source">Source</label>
          <select id="log-source" value={source} onChange={(event) => setSource(event.target.value as typeof source)}>
            <option value="all">Agent and engine</option>
            <option value="agent">Agent</option>
            <option value="engine">Engine</option>
          </select>
        </div>
      </div>
      {error && <ErrorView error={error} title="The replica logs could not be read" />}
      {live.error && <ErrorView error={live.error} title="Live log lines stopped; reload the page to resume them" />}
      {!data && fetching && <Loading what="replica logs" />}
      {data && shown.length === 0 && <Empty>No lines yet{replicaId ? ' from this replica' : ''}: agents print a few as they start, drain and fail.</Empty>}
      {shown.length > 0 && (
        // role=log on a wrapper: on the list itself it would take the list's semantics from its items.
        <div className="log-lines" role="log" aria-label={`Log lines of ${replicaId ?? 'all replicas'}`} tabIndex={0}><ol>
          {shown.map((line) => (
            <li key={`${line.replicaId}/${line.seq}/${line.at}`} className={`log-${line.level}`}>
              <time dateTime={line.at}>{new Date(line.at).toLocaleTimeString()}</time>{' '}
              {!replicaId && <span className="muted">{line.replicaId.slice(0, 12)}… </span>}
              <span className="log-source">{line.source}</span> <span className="log-level">{line.level}</span> {line.message}
            </li>
          ))}
        </ol></div>
      )}
      <p className="muted">Recent lines only (a few hundred per replica, kept in the servers' memory); addresses, paths and secrets are removed.</p>
    </div>
  );
}
