import { useEffect, useRef, useState } from 'react';
import { Link, useSearchParams } from 'react-router-dom';
import { useQuery, useSubscription, type CombinedError } from 'urql';
import { graphql } from '../gql';
import { TableScroll } from '../components/TableScroll';
import type { RequestUpdatedSubscription } from '../gql/graphql';
import { Empty, ErrorView, Loading } from '../components/states';
import { useCancelRequest } from '../graphql/requests';
import { newer, progressOf, REQUEST_UPDATED, type LiveRequest } from './RequestDetail';
import { formatTime } from '../components/format';
import { useRefetchWhenIdle } from '../graphql/use-refetch-when-idle';

const MEDIA_DEPLOYMENTS = graphql(`
  query MediaDeployments {
    deployments { id slug modelId status baseUrl }
    catalog { id modality }
  }
`);

const REQUESTS = graphql(`
  query Requests($deploymentId: ID!, $status: String) {
    requests(deploymentId: $deploymentId, status: $status, limit: 50) {
      id deploymentId modality status progress errorCode errorMessage queuedAt startedAt completedAt
    }
  }
`);

const STATUSES = ['queued', 'running', 'succeeded', 'failed', 'canceled'];
/** As written in the query (a literal: the server costs a variable limit at its maximum). */
const LIMIT = 50;

/**
 * A deployment's image and video jobs, newest first, kept live by `requestUpdated`. The
 * deployment and status live in the address (`?deployment=…&status=…`) so back and reload keep them.
 */
export function Requests() {
  const [params, setParams] = useSearchParams();
  const [{ data: deploymentsData, fetching: deploymentsFetching, error: deploymentsError }] = useQuery({ query: MEDIA_DEPLOYMENTS });
  const modalityOf = new Map(deploymentsData?.catalog.map((model) => [model.id, model.modality]) ?? []);
  // Text deployments have no request records; a model gone from the catalog is kept, to be safe.
  const deployments = (deploymentsData?.deployments ?? []).filter((deployment) => modalityOf.get(deployment.modelId) !== 'text');
  const deploymentId = params.get('deployment') ?? deployments.find((deployment) => modalityOf.has(deployment.modelId))?.id ?? deployments[0]?.id ?? null;
  const status = params.get('status') || null;
  const deployment = deployments.find((item) => item.id === deploymentId);

  const choose = (key: 'deployment' | 'status', value: string) => {
    const next = new URLSearchParams(params);
    if (value) next.set(key, value);
    else next.delete(key);
    setParams(next, { replace: true });
  };

  return (
    <section>
      <header className="page-header"><h1>Requests</h1></header>
      <p className="muted">Asynchronous image and video jobs of a deployment, newest first; they update live.</p>
      {deploymentsError && <ErrorView error={deploymentsError} title="The deployments could not be loaded" />}
      {!deploymentsData && deploymentsFetching && <Loading what="deployments" />}
      {deploymentsData && deployments.length === 0 && (
        <Empty>No image or video deployments yet; requests are their asynchronous jobs. <Link to="/catalog">Deploy an image or video model.</Link></Empty>
      )}
      {deploymentsData && deployments.length > 0 && (
        <>
          <form className="filters" style={FILTERS_STYLE} onSubmit={(event) => event.preventDefault()} aria-label="Filter requests">
            <div>
              <label htmlFor="request-deployment">Deployment</label>
              <select id="request-deployment" value={deploymentId ?? ''} onChange={(event) => choose('deployment', event.target.value)}>
                {deployments.map((item) => (
                  <option key={item.id} value={item.id}>{item.modelId} ({modalityOf.get(item.modelId) ?? 'unknown'}) · {item.slug}</option>
                ))}
              </select>
            </div>
            <div>
              <label htmlFor="request-status">Status</label>
              <select id="request-status" value={status ?? ''} onChange={(event) => choose('status', event.target.value)}>
                <option value="">All</option>
                {STATUSES.map((item) => <option key={item} value={item}>{item}</option>)}
              </select>
            </div>
          </form>
          {deploymentId && <RequestTable key={`${deploymentId}:${status ?? ''}`} deploymentId={deploymentId} status={status} baseUrl={deployment?.baseUrl ?? null} />}
        </>
      )}
    </section>
  );
}

function RequestTable({ deploymentId, status, baseUrl }: { deploymentId: string; status: string | null; baseUrl: string | null }) {
  const [{ data, fetching, stale, error }, refetch] = useQuery({ query: REQUESTS, variables: { deploymentId, status } });
  const [{ data: live }] = useSubscription({ query: REQUEST_UPDATED }, (previous: Record<string, LiveRequest> = {}, event: RequestUpdatedSubscription) =>
    event.requestUpdated.deploymentId === deploymentId ? { ...previous, [event.requestUpdated.id]: event.requestUpdated } : previous);
  const [cancelError, setCancelError] = useState<{ id: string; error: CombinedError } | null>(null);
  const cancelRequest = useCancelRequest();
  const refetchedFor = useRef(new Set<string>());
  const refetchWhenIdle = useRefetchWhenIdle(fetching || stale, refetch);

  // A job submitted after the list was read joins it by a fresh read (once per job).
  useEffect(() => {
    if (!data || !live) return;
    const listed = new Set(data.requests.map((request) => request.id));
    const missing = Object.values(live).filter((request) => !listed.has(request.id) && (!status || request.status === status) && !refetchedFor.current.has(request.id));
    if (missing.length === 0) return;
    for (const request of missing) refetchedFor.current.add(request.id);
    refetchWhenIdle();
  }, [live, data]);

  const cancel = async (id: string) => {
    setCancelError(null);
    const error = await cancelRequest(id);
    if (error) setCancelError({ id, error });
  };

  if (error) return <ErrorView error={error} title="The requests could not be loaded" />;
  if (!data) return fetching ? <Loading what="requests" /> : null;
  if (data.requests.length === 0) {
    return <Empty>{status ? `No ${status} requests on this deployment.` : 'No requests on this deployment yet.'} Submit one with <code>POST /v1/images/generations?async=true</code> or <code>POST /v1/videos</code>.</Empty>;
  }
  const rows = data.requests.map((request) => {
    const update = live?.[request.id];
    return update && newer(update, request) ? update : request;
  });
  return (
    <>
      {cancelError && <ErrorView error={cancelError.error} title={`${cancelError.id} was not canceled`} />}
      <TableScroll><table>
        <caption className="muted" style={{ textAlign: 'left', padding: '8px 0' }}>{rows.length === LIMIT ? `The newest ${LIMIT} requests` : `${rows.length} request${rows.length === 1 ? '' : 's'}`}</caption>
        <thead><tr><th>Request</th><th>Modality</th><th>Status</th><th>Progress</th><th>Queued</th><th>Completed</th><th><span className="muted">Actions</span></th></tr></thead>
        <tbody>
          {rows.map((request) => (
            <tr key={request.id}>
              <td><Link to={`/requests/${request.id}`}><code>{request.id}</code></Link></td>
              <td>{request.modality}</td>
              <td>
                <span className={`status status-${request.status}`}>{request.status}</span>
                {request.errorCode && <><br /><code className="muted">{request.errorCode}</code></>}
              </td>
              <td><progress max={100} value={progressOf(request)} aria-label={`Progress of ${request.id}`} /> {progressOf(request)}%</td>
              <td>{formatTime(request.queuedAt)}</td>
              <td>{formatTime(request.completedAt)}</td>
              <td>{request.status === 'queued' && <button type="button" aria-label={`Cancel ${request.id}`} onClick={() => void cancel(request.id)} disabled={!baseUrl}>Cancel</button>}</td>
            </tr>
          ))}
        </tbody>
      </table></TableScroll>
    </>
  );
}

const FILTERS_STYLE = { display: 'flex', gap: 16, flexWrap: 'wrap', marginBottom: 16 } as const;
