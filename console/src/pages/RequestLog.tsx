import { useState } from 'react';
import { Link, useSearchParams } from 'react-router-dom';
import { useMutation, useQuery } from 'urql';
import { graphql } from '../gql';
import type { RequestLogQuery } from '../gql/graphql';
import { ConfirmButton } from '../components/ConfirmButton';
import { Empty, ErrorView, Loading } from '../components/states';
import { formatDuration } from '../components/TraceTimeline';

const FILTER_CHOICES = graphql(`
  query RequestLogFilters {
    deployments { id slug modelId }
    apiKeys { id name }
    requestLogStoresBodies
  }
`);

// `first` is a literal: the server costs a variable page size at its maximum.
const REQUEST_LOG = graphql(`
  query RequestLog($filter: RequestLogFilter, $after: String) {
    requestLog(filter: $filter, first: 50, after: $after) {
      nextCursor
      entries {
        id startedAt apiKeyId apiKeyName deploymentId deploymentSlug sharedModel batchId model endpoint stream status errorCode finishReason
        promptTokens completionTokens cachedTokens ttftMs latencyMs traceId
      }
    }
  }
`);

const SET_STORES_BODIES = graphql(`mutation SetRequestLogStoresBodies($store: Boolean!) { setRequestLogStoresBodies(store: $store) }`);

type Entry = RequestLogQuery['requestLog']['entries'][number];

const STATUSES = ['succeeded', 'failed', 'canceled'];
const FINISH_REASONS = ['stop', 'length', 'tool_calls', 'content_filter'];
const RANGES: Array<[string, string, number | null]> = [['1h', 'Last hour', 60], ['24h', 'Last 24 hours', 1_440], ['7d', 'Last 7 days', 10_080], ['', 'All kept', null]];
const FILTER_KEYS = ['deployment', 'key', 'model', 'status', 'finish', 'range', 'q'] as const;
type FilterKey = typeof FILTER_KEYS[number];
const FILTERS_STYLE = { display: 'flex', gap: 16, flexWrap: 'wrap', marginBottom: 16, alignItems: 'flex-end' } as const;
/** Re-read after the bodies setting changes. */
const SETTINGS_CONTEXT = { additionalTypenames: ['Query'] };

/**
 * The workspace's text requests (chat, completions, responses, embeddings, batch lines), newest
 * first, like OpenAI's Logs: filters and the search live in the address, so back, reload and a
 * shared link keep them; pages go back in time by cursor.
 */
export function RequestLog() {
  const [params, setParams] = useSearchParams();
  const [{ data: choices, error: choicesError }, refetchChoices] = useQuery({ query: FILTER_CHOICES });
  const [search, setSearch] = useState(params.get('q') ?? '');
  const [model, setModel] = useState(params.get('model') ?? '');
  const value = (key: FilterKey) => params.get(key) ?? '';
  const choose = (key: FilterKey, next: string) => {
    const updated = new URLSearchParams(params);
    if (next) updated.set(key, next);
    else updated.delete(key);
    setParams(updated, { replace: true });
  };
  const filterKey = FILTER_KEYS.map((key) => value(key)).join('|');

  return (
    <section>
      <header className="page-header"><h1>Request log</h1></header>
      <p className="muted">
        Every chat, completions, responses and embeddings call of this workspace, and each batch line, newest first: who called, what it cost in
        tokens, how long it took. Kept for the server&apos;s retention (30 days by default).
      </p>
      {choicesError && <ErrorView error={choicesError} title="The filters could not be loaded" />}
      {choices && <BodySetting stores={choices.requestLogStoresBodies} onChanged={() => refetchChoices({ requestPolicy: 'network-only' })} />}
      <form style={FILTERS_STYLE} aria-label="Filter the request log" onSubmit={(event) => {
        event.preventDefault();
        const updated = new URLSearchParams(params);
        for (const [key, text] of [['q', search.trim()], ['model', model.trim()]] as const) {
          if (text) updated.set(key, text);
          else updated.delete(key);
        }
        setParams(updated, { replace: true });
      }}>
        <div>
          <label htmlFor="log-search">Request or trace id</label>
          <input id="log-search" value={search} placeholder="req_… or a trace id" onChange={(event) => setSearch(event.target.value)} size={28} />
        </div>
        <div>
          <label htmlFor="log-model">Model</label>
          <input id="log-model" value={model} placeholder="any" onChange={(event) => setModel(event.target.value)} size={22} />
        </div>
        <button type="submit">Search</button>
        <div>
          <label htmlFor="log-deployment">Deployment</label>
          <select id="log-deployment" value={value('deployment')} onChange={(event) => choose('deployment', event.target.value)}>
            <option value="">All</option>
            {choices?.deployments.map((item) => <option key={item.id} value={item.id}>{item.modelId} · {item.slug}</option>)}
          </select>
        </div>
        <div>
          <label htmlFor="log-key">API key</label>
          <select id="log-key" value={value('key')} onChange={(event) => choose('key', event.target.value)}>
            <option value="">All</option>
            {choices?.apiKeys.map((item) => <option key={item.id} value={item.id}>{item.name}</option>)}
          </select>
        </div>
        <div>
          <label htmlFor="log-status">Status</label>
          <select id="log-status" value={value('status')} onChange={(event) => choose('status', event.target.value)}>
            <option value="">All</option>
            {STATUSES.map((item) => <option key={item} value={item}>{item}</option>)}
          </select>
        </div>
        <div>
          <label htmlFor="log-finish">Finish reason</label>
          <select id="log-finish" value={value('finish')} onChange={(event) => choose('finish', event.target.value)}>
            <option value="">All</option>
            {FINISH_REASONS.map((item) => <option key={item} value={item}>{item}</option>)}
          </select>
        </div>
        <div>
          <label htmlFor="log-range">Time</label>
          <select id="log-range" value={value('range')} onChange={(event) => choose('range', event.target.value)}>
            {RANGES.map(([key, label]) => <option key={key} value={key}>{label}</option>)}
          </select>
        </div>
      </form>
      <LogTable key={filterKey} params={params} />
    </section>
  );
}

function BodySetting({ stores, onChanged }: { stores: boolean; onChanged: () => void }) {
  const [changed, setStores] = useMutation(SET_STORES_BODIES);
  const set = (store: boolean) => void setStores({ store }, SETTINGS_CONTEXT).then(onChanged);
  return (
    <div className="notice" role="note" style={{ display: 'flex', gap: 12, alignItems: 'center', flexWrap: 'wrap', marginBottom: 16 }}>
      <span data-testid="body-setting">
        {stores
          ? <><strong>Bodies are stored:</strong> new requests keep their prompt and answer (each cut to the server&apos;s cap), under the same retention.</>
          : <><strong>Bodies are not stored</strong> (the default): prompts hold your users&apos; data, so only the request&apos;s facts are logged unless you turn storing on.</>}
      </span>
      {stores
        ? <ConfirmButton label="Stop storing bodies" question="Stop storing request and answer bodies from now on? Stored ones stay until retention removes them." disabled={changed.fetching} onConfirm={() => set(false)} />
        : <ConfirmButton label="Store bodies" question="Store the prompt and answer of every new request? They may hold your users' data." disabled={changed.fetching} onConfirm={() => set(true)} />}
      {changed.error && <ErrorView error={changed.error} title="The setting was not changed" />}
    </div>
  );
}

function LogTable({ params }: { params: URLSearchParams }) {
  // Cursors of the pages before this one: "Newer" pops back to the previous page.
  const [cursors, setCursors] = useState<Array<string | null>>([null]);
  const after = cursors[cursors.length - 1];
  // The time filter is relative to when the filters were set (a stable window while paging).
  const [now] = useState(() => Date.now());
  const minutes = RANGES.find(([key]) => key === (params.get('range') ?? ''))?.[2] ?? null;
  const filter = {
    deploymentId: params.get('deployment') || null, apiKeyId: params.get('key') || null, model: params.get('model') || null,
    status: params.get('status') || null, finishReason: params.get('finish') || null, search: params.get('q') || null,
    from: minutes === null ? null : new Date(now - minutes * 60_000).toISOString(),
  };
  const [{ data, fetching, error }, refetch] = useQuery({ query: REQUEST_LOG, variables: { filter, after } });
  if (error) return <ErrorView error={error} title="The request log could not be read" />;
  if (!data) return fetching ? <Loading what="the request log" /> : null;
  const { entries, nextCursor } = data.requestLog;
  return (
    <>
      {entries.length === 0
        ? <Empty>No requests match. Text requests appear here a second or so after they end.</Empty>
        : (
          <table aria-label="Request log">
            <thead>
              <tr>
                <th scope="col">Time</th><th scope="col">Request</th><th scope="col">Key</th><th scope="col">Deployment</th><th scope="col">Status</th>
                <th scope="col">Tokens in / out</th><th scope="col">TTFT</th><th scope="col">Latency</th><th scope="col">Finish</th>
              </tr>
            </thead>
            <tbody>{entries.map((entry) => <LogRow key={entry.id} entry={entry} />)}</tbody>
          </table>
        )}
      <p style={{ display: 'flex', gap: 8, alignItems: 'center' }}>
        <button type="button" disabled={cursors.length === 1} onClick={() => setCursors(cursors.slice(0, -1))}>Newer</button>
        <button type="button" disabled={!nextCursor} onClick={() => nextCursor && setCursors([...cursors, nextCursor])}>Older</button>
        <button type="button" onClick={() => refetch({ requestPolicy: 'network-only' })}>Refresh</button>
        <span className="muted">Page {cursors.length}</span>
      </p>
    </>
  );
}

function LogRow({ entry }: { entry: Entry }) {
  return (
    <tr>
      <td>{new Date(entry.startedAt).toLocaleString()}</td>
      <td>
        <Link to={`/request-log/${encodeURIComponent(entry.id)}`}><code>{entry.id}</code></Link>
        <div className="muted">{entry.endpoint}{entry.stream ? ' · stream' : ''}{entry.batchId ? ' · batch line' : ''}</div>
      </td>
      <td>{entry.apiKeyName ?? <code>{entry.apiKeyId}</code>}</td>
      <td>
        {entry.sharedModel ? <code>{entry.sharedModel}</code> : <>{entry.model}<div className="muted"><code>{entry.deploymentSlug ?? entry.deploymentId}</code></div></>}
      </td>
      <td><span className={`status status-${entry.status === 'failed' ? 'failed' : entry.status === 'succeeded' ? 'running' : 'other'}`}>{entry.status}</span>
        {entry.errorCode && <div className="muted"><code>{entry.errorCode}</code></div>}</td>
      <td>{entry.promptTokens} / {entry.completionTokens}{entry.cachedTokens > 0 && <div className="muted">{entry.cachedTokens} cached</div>}</td>
      <td>{formatDuration(entry.ttftMs)}</td>
      <td>{formatDuration(entry.latencyMs)}</td>
      <td>{entry.finishReason ?? '—'}</td>
    </tr>
  );
}
