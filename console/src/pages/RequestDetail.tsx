import { useCallback, useEffect, useState } from 'react';
import { Link, useParams } from 'react-router-dom';
import { useQuery, useSubscription, type CombinedError } from 'urql';
import { graphql } from '../gql';
import type { RequestUpdatedSubscription } from '../gql/graphql';
import { useCancelRequest, useOutputUrls } from '../graphql/requests';
import { Empty, ErrorView, Loading } from '../components/states';
import { formatTime } from '../components/format';

const REQUEST = graphql(`
  query Request($id: ID!) {
    request(id: $id) {
      id deploymentId modality status progress outputObjectKey outputBucket storageProvider errorCode errorMessage
      billedGpuSeconds queuedAt startedAt completedAt
    }
  }
`);

const REQUEST_DEPLOYMENT = graphql(`
  query RequestDeployment($id: ID!) {
    deployment(id: $id) { id slug modelId baseUrl }
  }
`);

export const REQUEST_UPDATED = graphql(`
  subscription RequestUpdated {
    requestUpdated {
      id deploymentId modality status progress outputObjectKey outputBucket storageProvider errorCode errorMessage
      billedGpuSeconds queuedAt startedAt completedAt
    }
  }
`);

export type LiveRequest = RequestUpdatedSubscription['requestUpdated'];

export const TERMINAL = ['succeeded', 'failed', 'canceled'];

/** One image or video job: its state live, previews from freshly signed links, cancel while queued. */
export function RequestDetail() {
  const { id = '' } = useParams();
  const [{ data, fetching, error }, refetch] = useQuery({ query: REQUEST, variables: { id } });
  const request = data?.request;
  const [deploymentResult] = useQuery({ query: REQUEST_DEPLOYMENT, variables: { id: request?.deploymentId ?? '' }, pause: !request });
  const deployment = deploymentResult.data?.deployment;
  const [{ data: live }] = useSubscription({ query: REQUEST_UPDATED }, (previous: LiveRequest | null = null, event: RequestUpdatedSubscription) =>
    event.requestUpdated.id === id ? event.requestUpdated : previous);
  // The newest of what the query and the subscription said (a subscription event may predate the query's answer).
  const current = live && request && live.id === request.id && newer(live, request) ? live : request;

  const [links, setLinks] = useState<{ urls: string[]; at: Date } | null>(null);
  const [linkError, setLinkError] = useState<CombinedError | null>(null);
  const [cancelError, setCancelError] = useState<CombinedError | null>(null);
  const outputUrls = useOutputUrls();
  const cancelRequest = useCancelRequest();
  const [canceling, setCanceling] = useState(false);

  const status = current?.status;
  const fetchLinks = useCallback(async () => {
    setLinkError(null);
    const result = await outputUrls(id);
    if ('error' in result) setLinkError(result.error);
    else setLinks({ urls: result.urls, at: new Date() });
  }, [outputUrls, id]);

  useEffect(() => {
    if (status === 'succeeded') void fetchLinks();
  }, [status, fetchLinks]);

  const cancel = async () => {
    setCanceling(true);
    setCancelError(null);
    const problem = await cancelRequest(id);
    if (problem) setCancelError(problem);
    else refetch({ requestPolicy: 'network-only' });
    setCanceling(false);
  };

  return (
    <section>
      <p><Link to={request ? `/requests?deployment=${encodeURIComponent(request.deploymentId)}` : '/requests'}>← Requests</Link></p>
      <header className="page-header"><h1>Request <code>{id}</code></h1></header>
      {error && <ErrorView error={error} title="The request could not be loaded" />}
      {!data && fetching && <Loading what="the request" />}
      {current && (
        <>
          <dl className="facts" style={FACTS_STYLE}>
            <dt>Status</dt>
            <dd><span className={`status status-${current.status}`} data-testid="request-status">{current.status}</span></dd>
            <dt>Progress</dt>
            <dd>
              <progress max={100} value={progressOf(current)} aria-label="Progress" /> {progressOf(current)}%
            </dd>
            <dt>Modality</dt><dd>{current.modality}</dd>
            <dt>Deployment</dt>
            <dd>{deployment ? <Link to={`/deployments/${deployment.id}`}>{deployment.modelId}</Link> : <code>{current.deploymentId}</code>}</dd>
            <dt>Queued</dt><dd>{formatTime(current.queuedAt)}</dd>
            <dt>Started</dt><dd>{formatTime(current.startedAt)}</dd>
            <dt>Completed</dt><dd>{formatTime(current.completedAt)}</dd>
            <dt>Billed GPU seconds</dt><dd>{current.billedGpuSeconds.toFixed(2)}</dd>
            <dt>Output</dt>
            <dd>{current.outputObjectKey ? <><code>{current.outputObjectKey}</code> <span className="muted">in {current.outputBucket} ({current.storageProvider})</span></> : '—'}</dd>
            {current.errorCode && <><dt>Error</dt><dd><code>{current.errorCode}</code> {current.errorMessage}</dd></>}
          </dl>

          {current.status === 'queued' && (
            <p>
              <button type="button" className="danger" onClick={() => void cancel()} disabled={canceling}>{canceling ? 'Canceling…' : 'Cancel request'}</button>
              {' '}<span className="muted">Only a queued request can be canceled; it costs nothing.</span>
            </p>
          )}
          {cancelError && <ErrorView error={cancelError} title="The request was not canceled" />}

          <h2>Outputs</h2>
          {!TERMINAL.includes(current.status) && <Empty>Outputs appear here when the request succeeds.</Empty>}
          {(current.status === 'failed' || current.status === 'canceled') && <Empty>This request produced no output.</Empty>}
          {current.status === 'succeeded' && (
            <>
              <p className="muted">
                Links are signed for about an hour{links ? ` (signed ${links.at.toLocaleTimeString()})` : ''}.{' '}
                <button type="button" onClick={() => void fetchLinks()}>Get fresh links</button>
              </p>
              {linkError && <ErrorView error={linkError} title="The output links could not be signed" />}
              {!links && !linkError && <Loading what="output links" />}
              {links && links.urls.length === 0 && <Empty>The outputs have expired and were removed.</Empty>}
              {links && links.urls.length > 0 && (
                <ul className="previews" style={PREVIEWS_STYLE}>
                  {links.urls.map((url, index) => (
                    <li key={url} style={{ listStyle: 'none' }}>
                      {current.modality === 'video'
                        ? <video src={url} controls aria-label={`Output ${index + 1} of ${links.urls.length}`} style={MEDIA_STYLE} />
                        : <img src={url} alt={`Output ${index + 1} of ${links.urls.length}`} style={MEDIA_STYLE} onError={() => void fetchLinks()} />}
                      <br /><a href={url} target="_blank" rel="noreferrer">Open output {index + 1}</a>
                    </li>
                  ))}
                </ul>
              )}
            </>
          )}
        </>
      )}
    </section>
  );
}

const FACTS_STYLE = { display: 'grid', gridTemplateColumns: 'max-content 1fr', gap: '6px 16px', background: '#fff', padding: 16, borderRadius: 8 } as const;
const PREVIEWS_STYLE = { display: 'flex', flexWrap: 'wrap', gap: 16, padding: 0 } as const;
const MEDIA_STYLE = { maxWidth: 360, maxHeight: 360, border: '1px solid #dde1e6', borderRadius: 6, background: '#fff' } as const;

const ORDER = ['queued', 'running', 'succeeded', 'failed', 'canceled'];
const rank = (status: string) => Math.min(ORDER.indexOf(status), 2);

/** Whether `a` is at least as far along as `b`: states only move forward, progress only grows. */
export function newer(a: { status: string; progress: number }, b: { status: string; progress: number }): boolean {
  return rank(a.status) > rank(b.status) || (rank(a.status) === rank(b.status) && a.progress >= b.progress);
}

export function progressOf(request: { status: string; progress: number }): number {
  return request.status === 'succeeded' ? 100 : request.status === 'running' ? Math.min(99, request.progress) : 0;
}

