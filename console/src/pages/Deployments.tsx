import { Link } from 'react-router-dom';
import { useQuery } from 'urql';
import { graphql } from '../gql';
import { Empty, ErrorView, Loading } from '../components/states';

const DEPLOYMENTS = graphql(`
  query Deployments {
    deployments { id slug modelId status sharing replicas { id } }
  }
`);

/** Module-level: urql re-runs a query whose context object changes, so a new one per render would loop. */
const CONTEXT = { additionalTypenames: ['Deployment'] };

export function Deployments() {
  const [{ data, fetching, error }] = useQuery({ query: DEPLOYMENTS, context: CONTEXT });
  return (
    <section>
      <header className="page-header">
        <h1>Deployments</h1>
        <Link className="button" to="/catalog">New deployment</Link>
      </header>
      {error && <ErrorView error={error} />}
      {!data && fetching && <Loading what="deployments" />}
      {data && data.deployments.length === 0 && <Empty>No deployments yet. <Link to="/catalog">Create one from the catalog.</Link></Empty>}
      {data && data.deployments.length > 0 && (
        <table>
          <thead><tr><th>Model</th><th>Slug</th><th>Status</th><th>Replicas</th></tr></thead>
          <tbody>
            {data.deployments.map((deployment) => (
              <tr key={deployment.id}>
                <td><Link to={`/deployments/${deployment.id}`}>{deployment.modelId}</Link></td>
                <td><code>{deployment.slug}</code></td>
                <td><span className={`status status-${deployment.status.toLowerCase()}`}>{deployment.status}</span></td>
                <td>{deployment.replicas.length}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}
