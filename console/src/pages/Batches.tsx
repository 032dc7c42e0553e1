import { useEffect, useRef, useState } from 'react';
import { Link, useSearchParams } from 'react-router-dom';
import { useQuery, useSubscription, type CombinedError } from 'urql';
import { graphql } from '../gql';
import { TableScroll } from '../components/TableScroll';
import type { BatchesQuery, BatchUpdatedSubscription } from '../gql/graphql';
import { ConfirmButton } from '../components/ConfirmButton';
import { Empty, ErrorView, Loading } from '../components/states';
import { formatTime } from '../components/format';
import { CANCELLABLE, newerBatch, useCancelBatch } from '../graphql/batches';
import { useRefetchWhenIdle } from '../graphql/use-refetch-when-idle';

const TEXT_DEPLOYMENTS = graphql(`
  query BatchDeployments {
    deployments { id slug modelId status baseUrl }
    catalog { id modality }
  }
`);

const BATCHES = graphql(`
  query Batches($deploymentId: ID) {
    batches(deploymentId: $deploymentId, limit: 50) {
      id deploymentId endpoint status inputFileId outputFileId errorFileId
      requestCounts { total completed failed }
      errors { code message line }
      createdAt completedAt failedAt expiredAt cancelledAt
      inputFileUrl outputFileUrl errorFileUrl
    }
  }
`);

/** No links here: they are signed at each read, and an event may come several times a second; the list is re-read when files appear. */
const BATCH_UPDATED = graphql(`
  subscription BatchUpdated($deploymentId: ID) {
    batchUpdated(deploymentId: $deploymentId) {
      id deploymentId endpoint status inputFileId outputFileId errorFileId
      requestCounts { total completed failed }
      errors { code message line }
      createdAt completedAt failedAt expiredAt cancelledAt
    }
  }
`);

type ListedBatch = BatchesQuery['batches'][number];
type LiveBatch = BatchUpdatedSubscription['batchUpdated'];

/** As written in the query (a literal: the server costs a variable limit at its maximum). */
const LIMIT = 50;
/** Links live about an hour in managed storage: re-read the list well before, so a link on screen still works. */
const RELINK_MS = 20 * 60_000;

/**
 * Batches of the OpenAI Batch API (`POST {baseUrl}/batches`) on text and embedding deployments,
 * newest first, live: status, progress, and links to their input, output and error files. The
 * deployment filter lives in the address (`?deployment=…`) so back and reload keep it.
 */
export function Batches() {
  const [params, setParams] = useSearchParams();
  const [{ data: deploymentsData, fetching: deploymentsFetching, error: deploymentsError }] = useQuery({ query: TEXT_DEPLOYMENTS });
  const modalityOf = new Map(deploymentsData?.catalog.map((model) => [model.id, model.modality]) ?? []);
  // Image and video deployments have no batches; a model gone from the catalog is kept, to be safe.
  const deployments = (deploymentsData?.deployments ?? []).filter((deployment) => (modalityOf.get(deployment.modelId) ?? 'text') === 'text');
  const deploymentId = params.get('deployment') || null;

  const choose = (value: string) => {
    const next = new URLSearchParams(params);
    if (value) next.set('deployment', value);
    else next.delete('deployment');
    setParams(next, { replace: true });
  };

  return (
    <section>
      <header className="page-header"><h1>Batches</h1></header>
      <p className="muted">
        Offline work sent with the OpenAI Batch API to a deployment&apos;s <code>/files</code> and <code>/batches</code>; its lines run in the capacity live requests leave free. Batches update live.
      </p>
      {deploymentsError && <ErrorView error={deploymentsError} title="The deployments could not be loaded" />}
      {!deploymentsData && deploymentsFetching && <Loading what="deployments" />}
      {deploymentsData && deployments.length === 0 && (
        <Empty>No text or embedding deployments yet; batches run on them. <Link to="/catalog">Deploy a model.</Link></Empty>
      )}
      {deploymentsData && deployments.length > 0 && (
        <>
          <form className="filters" style={FILTERS_STYLE} onSubmit={(event) => event.preventDefault()} aria-label="Filter batches">
            <div>
              <label htmlFor="batch-deployment">Deployment</label>
              <select id="batch-deployment" value={deploymentId ?? ''} onChange={(event) => choose(event.target.value)}>
                <option value="">All deployments</option>
                {deployments.map((item) => <option key={item.id} value={item.id}>{item.modelId} · {item.slug}</option>)}
              </select>
            </div>
          </form>
          <BatchTable
            key={deploymentId ?? ''}
            deploymentId={deploymentId}
            slugOf={new Map(deployments.map((item) => [item.id, item.slug]))}
            example={deployments.find((item) => item.id === deploymentId)?.baseUrl ?? deployments[0].baseUrl}
          />
        </>
      )}
    </section>
  );
}

function BatchTable({ deploymentId, slugOf, example }: { deploymentId: string | null; slugOf: Map<string, string>; example: string }) {
  const [{ data, fetching, stale, error }, refetch] = useQuery({ query: BATCHES, variables: { deploymentId }, context: BATCH_CONTEXT });
  const [{ data: live, error: liveError }] = useSubscription({ query: BATCH_UPDATED, variables: { deploymentId } },
    (previous: Record<string, LiveBatch> = {}, event: BatchUpdatedSubscription) => {
      const update = event.batchUpdated;
      const known = previous[update.id];
      return known && !newerBatch(update, known) ? previous : { ...previous, [update.id]: update };
    });
  const [cancelError, setCancelError] = useState<{ id: string; error: CombinedError } | null>(null);
  const cancelBatch = useCancelBatch();
  const refetchWhenIdle = useRefetchWhenIdle(fetching || stale, refetch);
  const refetchedFor = useRef(new Set<string>());

  // A batch created after the list was read joins it, and one whose files were just written
  // gets their links, by a fresh read (once per batch and file set).
  useEffect(() => {
    if (!data || !live) return;
    const listed = new Map(data.batches.map((batch) => [batch.id, batch]));
    const wanting = Object.values(live).filter((batch) => {
      const row = listed.get(batch.id);
      const reason = `${batch.id}:${batch.outputFileId ?? ''}:${batch.errorFileId ?? ''}`;
      const missing = !row || row.outputFileId !== batch.outputFileId || row.errorFileId !== batch.errorFileId;
      if (!missing || refetchedFor.current.has(reason)) return false;
      refetchedFor.current.add(reason);
      return true;
    });
    if (wanting.length > 0) refetchWhenIdle();
  }, [live, data]);

  useEffect(() => {
    const timer = setInterval(() => refetchWhenIdle(), RELINK_MS);
    return () => clearInterval(timer);
  }, [refetchWhenIdle]);

  const cancel = async (id: string) => {
    setCancelError(null);
    const problem = await cancelBatch(id);
    if (problem) setCancelError({ id, error: problem });
    else refetchWhenIdle();
  };

  if (error) return <ErrorView error={error} title="The batches could not be loaded" />;
  if (!data) return fetching ? <Loading what="batches" /> : null;
  if (data.batches.length === 0) {
    return (
      <Empty>
        No batches {deploymentId ? 'on this deployment' : 'in this workspace'} yet. Upload a JSONL file with <code>client.files.create(purpose=&quot;batch&quot;)</code> and
        start it with <code>client.batches.create</code>, the OpenAI SDK pointed at <code>{example}</code>.
      </Empty>
    );
  }
  const rows = data.batches.map((batch) => merge(batch, live?.[batch.id]));
  return (
    <>
      {liveError && <ErrorView error={liveError} title="Live updates stopped; reload the page to resume them" />}
      {cancelError && <ErrorView error={cancelError.error} title={`${cancelError.id} was not cancelled`} />}
      <TableScroll><table className="batches">
        <caption className="muted" style={{ textAlign: 'left', padding: '8px 0' }}>
          {rows.length === LIMIT ? `The newest ${LIMIT} batches` : `${rows.length} batch${rows.length === 1 ? '' : 'es'}`}. File links are signed for about an hour.
        </caption>
        <thead>
          <tr><th>Batch</th><th>Endpoint</th><th>Status</th><th>Progress</th><th>Created</th><th>Files</th><th><span className="muted">Actions</span></th></tr>
        </thead>
        <tbody>
          {rows.map((batch) => (
            <tr key={batch.id}>
              <td>
                <code className="id">{batch.id}</code>
                {!deploymentId && <><br /><span className="muted">on <Link to={`/deployments/${batch.deploymentId}`}>{slugOf.get(batch.deploymentId) ?? batch.deploymentId}</Link></span></>}
              </td>
              <td><code>{batch.endpoint}</code></td>
              <td>
                <span className={`status status-${batch.status}`}>{batch.status}</span>
                {ended(batch) && <><br /><span className="muted">{formatTime(ended(batch))}</span></>}
                {batch.errors && batch.errors.length > 0 && <BatchErrors batch={batch} />}
              </td>
              <td><Progress batch={batch} /></td>
              <td>{formatTime(batch.createdAt)}</td>
              <td><FileLinks batch={batch} /></td>
              <td>
                {CANCELLABLE.includes(batch.status) && (
                  <ConfirmButton label="Cancel" accessibleName={`Cancel ${batch.id}`} question="Cancel this batch? No more of its lines start; finished ones are kept in its files."
                    onConfirm={() => void cancel(batch.id)} />
                )}
              </td>
            </tr>
          ))}
        </tbody>
      </table></TableScroll>
    </>
  );
}

/** The list's row with what a newer event said (status, counts, file ids); links stay the list's, until the re-read brings the new ones. */
function merge(listed: ListedBatch, update: LiveBatch | undefined): ListedBatch {
  if (!update || !newerBatch(update, listed)) return listed;
  const sameFiles = update.outputFileId === listed.outputFileId && update.errorFileId === listed.errorFileId;
  return { ...listed, ...update, outputFileUrl: sameFiles ? listed.outputFileUrl : null, errorFileUrl: sameFiles ? listed.errorFileUrl : null };
}

function ended(batch: ListedBatch): string | null {
  return batch.completedAt ?? batch.failedAt ?? batch.expiredAt ?? batch.cancelledAt ?? null;
}

function Progress({ batch }: { batch: ListedBatch }) {
  const { total, completed, failed } = batch.requestCounts;
  if (batch.status === 'validating') return <span className="muted">validating the input file…</span>;
  if (total === 0) return <span className="muted">—</span>;
  const done = completed + failed;
  return (
    <span>
      <progress max={total} value={done} aria-label={`Progress of ${batch.id}`} /> {done} / {total}
      {failed > 0 && <><br /><span className="muted">{failed} failed</span></>}
    </span>
  );
}

function FileLinks({ batch }: { batch: ListedBatch }) {
  const files: Array<[string, string | null, string | null]> = [
    ['Input', batch.inputFileId, batch.inputFileUrl],
    ['Output', batch.outputFileId, batch.outputFileUrl],
    ['Errors', batch.errorFileId, batch.errorFileUrl],
  ];
  const shown = files.filter(([, id]) => id);
  return (
    <ul style={LINKS_STYLE}>
      {shown.map(([label, id, url]) => (
        <li key={label}>
          {url
            ? <a href={url} download={`${id}.jsonl`} aria-label={`${label} file of ${batch.id}`} title={id ?? undefined}>{label}</a>
            : <span className="muted" title={id ?? undefined}>{label}</span>}
        </li>
      ))}
      {['finalizing', 'cancelling'].includes(batch.status) && <li className="muted">writing files…</li>}
    </ul>
  );
}

function BatchErrors({ batch }: { batch: ListedBatch }) {
  const errors = batch.errors ?? [];
  return (
    <details>
      <summary>{errors.length} problem{errors.length === 1 ? '' : 's'} in the input file</summary>
      <ul>
        {errors.slice(0, 20).map((item, index) => (
          <li key={index}>{item.line !== null && <>line {item.line}: </>}{item.message} <code className="muted">{item.code}</code></li>
        ))}
      </ul>
    </details>
  );
}

// Module-level: urql re-runs an operation whose context object changes.
const BATCH_CONTEXT = { additionalTypenames: ['Batch'] };
const FILTERS_STYLE = { display: 'flex', gap: 16, flexWrap: 'wrap', marginBottom: 16 } as const;
const LINKS_STYLE = { listStyle: 'none', margin: 0, padding: 0 } as const;
