import { useRef, useState } from 'react';
import { Link } from 'react-router-dom';
import { useQuery, useSubscription } from 'urql';
import { graphql } from '../gql';
import { TableScroll } from '../components/TableScroll';
import type { DeploymentsQuery } from '../gql/graphql';
import { Empty, ErrorView, Loading } from '../components/states';
import { useRefetchWhenIdle } from '../graphql/use-refetch-when-idle';

const DEPLOYMENTS = graphql(`
  query Deployments {
    deployments { id slug modelId status sharing updatedAt replicas { id status } }
  }
`);

/** Every change of a deployment of the workspace, its replicas included (a replica placed, ready or ended also fires it). */
const DEPLOYMENTS_LIVE = graphql(`
  subscription DeploymentsLive {
    deploymentUpdated { id slug modelId status sharing updatedAt replicas { id status } }
  }
`);

type Listed = DeploymentsQuery['deployments'][number];

/** Module-level: urql re-runs a query whose context object changes, so a new one per render would loop. */
const CONTEXT = { additionalTypenames: ['Deployment'] };

/** Replicas that count: placed and not ended (a terminated replica stays listed on the deployment's page, behind a checkbox). */
export function activeReplicas(replicas: ReadonlyArray<{ status: string }>): number {
  return replicas.filter((replica) => replica.status !== 'Terminated').length;
}

/**
 * The workspace's deployments, live: a change made anywhere (another tab, the API, the
 * autoscaler, another server) arrives over `deploymentUpdated` and replaces the row; a
 * deployment the list does not have yet (created elsewhere), or one deleted, re-reads the list.
 */
export function Deployments() {
  const [{ data, fetching, stale, error }, refetch] = useQuery({ query: DEPLOYMENTS, context: CONTEXT });
  const [live, setLive] = useState<Record<string, Listed>>({});
  const reread = useRefetchWhenIdle(fetching || stale, refetch);
  const listed = useRef(new Set<string>());
  listed.current = new Set(data?.deployments.map((item) => item.id));
  const [updates] = useSubscription({ query: DEPLOYMENTS_LIVE }, (_previous: unknown, event) => {
    const changed = event.deploymentUpdated;
    setLive((current) => ({ ...current, [changed.id]: changed }));
    if (changed.status === 'Deleted' || !listed.current.has(changed.id)) reread();
    return event;
  });

  // An event is newer than a read unless the read saw a later change (a replica's change leaves
  // updatedAt as it was, and its event is the newer one).
  const rows = (data?.deployments ?? [])
    .map((deployment) => (live[deployment.id] && live[deployment.id].updatedAt >= deployment.updatedAt ? live[deployment.id] : deployment))
    .filter((deployment) => deployment.status !== 'Deleted');
  return (
    <section>
      <header className="page-header">
        <h1>Deployments</h1>
        <Link className="button" to="/catalog">New deployment</Link>
      </header>
      {error && <ErrorView error={error} />}
      {updates.error && <ErrorView error={updates.error} title="Live updates stopped; reload the page to resume them" />}
      {!data && fetching && <Loading what="deployments" />}
      {data && rows.length === 0 && <Empty>No deployments yet. <Link to="/catalog">Create one from the catalog.</Link></Empty>}
      {data && rows.length > 0 && (
        <TableScroll>
          <table aria-label="Deployments">
            <thead><tr><th scope="col">Model</th><th scope="col">Slug</th><th scope="col">Status</th><th scope="col">Replicas</th></tr></thead>
            <tbody>
              {rows.map((deployment) => (
                <tr key={deployment.id}>
                  <td><Link to={`/deployments/${deployment.id}`}>{deployment.modelId}</Link></td>
                  <td><code>{deployment.slug}</code></td>
                  <td><span className={`status status-${deployment.status.toLowerCase()}`}>{deployment.status}</span></td>
                  <td title="Placed and not terminated">{activeReplicas(deployment.replicas)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </TableScroll>
      )}
    </section>
  );
}
