import { Link, useParams } from 'react-router-dom';
import { useQuery } from 'urql';
import { graphql } from '../gql';
import { CopyButton } from '../components/CopyButton';
import { ErrorView, Loading } from '../components/states';
import { formatDuration, TraceTimeline } from '../components/TraceTimeline';

const ENTRY = graphql(`
  query RequestLogEntry($id: ID!) {
    requestLogEntry(id: $id) {
      id requestId startedAt apiKeyId apiKeyName deploymentId deploymentSlug sharedModel replicaId batchId model endpoint stream status errorCode
      finishReason promptTokens completionTokens cachedTokens ttftMs latencyMs traceId hasBody
      phases { admittedMs dispatchedMs startedMs firstTokenMs endedMs }
      body { request requestTruncated response responseTruncated }
    }
  }
`);

/** One request of the log: every field, its trace timeline and id, and its bodies where the workspace stored them. */
export function RequestLogEntry() {
  const { id = '' } = useParams();
  const [{ data, fetching, error }] = useQuery({ query: ENTRY, variables: { id } });
  const back = <p><Link to="/request-log">← Request log</Link></p>;
  if (error) return <section>{back}<h1>Request</h1><ErrorView error={error} title="The request could not be read" /></section>;
  if (!data) return <section>{back}<h1>Request</h1>{fetching && <Loading what="the request" />}</section>;
  const entry = data.requestLogEntry;
  const rows: Array<[string, React.ReactNode]> = [
    ['Request id', <><code>{entry.id}</code> <CopyButton text={entry.id} label="Copy request id" /></>],
    ['Time', new Date(entry.startedAt).toLocaleString()],
    ['Status', <>{entry.status}{entry.errorCode && <> · <code>{entry.errorCode}</code></>}</>],
    ['Finish reason', entry.finishReason ?? '—'],
    ['Endpoint', <>{entry.endpoint}{entry.stream ? ' (stream)' : ''}</>],
    ['Model', entry.model],
    [entry.sharedModel ? 'Shared model' : 'Deployment', entry.sharedModel
      ? <code>{entry.sharedModel}</code>
      : entry.deploymentId ? <Link to={`/deployments/${encodeURIComponent(entry.deploymentId)}`}><code>{entry.deploymentSlug ?? entry.deploymentId}</code></Link> : '—'],
    ...(entry.replicaId ? [['Replica', <code key="replica">{entry.replicaId}</code>] as [string, React.ReactNode]] : []),
    ...(entry.batchId ? [['Batch', <Link key="batch" to="/batches"><code>{entry.batchId}</code></Link>] as [string, React.ReactNode]] : []),
    ['API key', <>{entry.apiKeyName ?? '—'} <span className="muted"><code>{entry.apiKeyId}</code></span></>],
    ['Tokens', `${entry.promptTokens} in (${entry.cachedTokens} cached), ${entry.completionTokens} out`],
    ['Time to first token', formatDuration(entry.ttftMs)],
    ['Latency', formatDuration(entry.latencyMs)],
    ['Trace id', entry.traceId ? <><code data-testid="trace-id">{entry.traceId}</code> <CopyButton text={entry.traceId} label="Copy trace id" /></> : <span className="muted">none (tracing was off)</span>],
  ];
  return (
    <section>
      {back}
      <header className="page-header"><h1>Request <code>{entry.id}</code></h1></header>
      <table aria-label="Request fields">
        <tbody>{rows.map(([label, value]) => <tr key={label}><th scope="row">{label}</th><td>{value}</td></tr>)}</tbody>
      </table>
      <h2>Timeline</h2>
      <TraceTimeline phases={entry.phases} latencyMs={entry.latencyMs} />
      <h2>Bodies</h2>
      {entry.body ? (
        <>
          <h3>Request{entry.body.requestTruncated && <span className="badge" style={{ marginLeft: 8 }}>truncated</span>}</h3>
          <pre aria-label="Request body" tabIndex={0} style={{ whiteSpace: 'pre-wrap', maxHeight: 360 }}>{pretty(entry.body.request)}</pre>
          <h3>Answer{entry.body.responseTruncated && <span className="badge" style={{ marginLeft: 8 }}>truncated</span>}</h3>
          {entry.body.response === null
            ? <p className="muted">Answers of embeddings are not stored (vectors).</p>
            : <pre aria-label="Answer body" tabIndex={0} style={{ whiteSpace: 'pre-wrap', maxHeight: 360 }}>{pretty(entry.body.response)}</pre>}
        </>
      ) : <p className="muted">Not stored: the workspace did not store bodies when this request ran (the Request log page turns storing on).</p>}
    </section>
  );
}

/** JSON indented when it parses whole; anything else (a stream's SSE lines, a cut body) as it is. */
function pretty(text: string): string {
  try {
    return JSON.stringify(JSON.parse(text), null, 2);
  } catch {
    return text;
  }
}
