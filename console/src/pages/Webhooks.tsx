import { useEffect, useState } from 'react';
import { useMutation, useQuery, useSubscription } from 'urql';
import { graphql } from '../gql';
import { TableScroll } from '../components/TableScroll';
import { ConfirmButton } from '../components/ConfirmButton';
import { CopyButton } from '../components/CopyButton';
import { Empty, ErrorView, fieldError, Loading } from '../components/states';
import { formatTime } from '../components/format';
import { Field, UnplacedError } from '../components/Field';
import { useRefetchWhenIdle } from '../graphql/use-refetch-when-idle';

const ENDPOINTS = graphql(`
  query WebhookEndpoints {
    webhookEndpoints { id url description enabled disabledReason consecutiveFailures createdAt }
  }
`);

const CREATE_ENDPOINT = graphql(`
  mutation CreateWebhookEndpoint($input: CreateWebhookEndpointInput!) {
    createWebhookEndpoint(input: $input) { id url description enabled disabledReason consecutiveFailures createdAt }
  }
`);

const UPDATE_ENDPOINT = graphql(`
  mutation UpdateWebhookEndpoint($id: ID!, $input: UpdateWebhookEndpointInput!) {
    updateWebhookEndpoint(id: $id, input: $input) { id url description enabled disabledReason consecutiveFailures createdAt }
  }
`);

const DELETE_ENDPOINT = graphql(`
  mutation DeleteWebhookEndpoint($id: ID!) {
    deleteWebhookEndpoint(id: $id) { id }
  }
`);

const SEND_TEST = graphql(`
  mutation SendTestWebhook($endpointId: ID!) {
    sendTestWebhook(endpointId: $endpointId) { id url status }
  }
`);

const SIGNING_SECRET = graphql(`
  query WebhookSigningSecret {
    webhookSigningSecret { secret rotatedAt previousExpiresAt }
  }
`);

const ROTATE_SECRET = graphql(`
  mutation RotateWebhookSigningSecret($graceSeconds: Int) {
    rotateWebhookSigningSecret(graceSeconds: $graceSeconds) { secret rotatedAt previousExpiresAt }
  }
`);

const DELIVERIES = graphql(`
  query WebhookDeliveries($endpointId: ID) {
    webhookDeliveries(endpointId: $endpointId, limit: 50) {
      id eventId eventType target endpointId url status attempts nextAttemptAt lastStatusCode lastError createdAt completedAt
      attemptLog { id attempt url statusCode error latencyMs succeeded requestBody signature createdAt }
    }
  }
`);

const DELIVERY_LOGGED = graphql(`
  subscription WebhookDeliveryLogged {
    webhookDeliveryLogged { id deliveryId attempt statusCode latencyMs succeeded }
  }
`);

// Contexts are constants: urql re-runs an operation whose context object changes, so an inline
// literal would re-render without end.
const ENDPOINT_CONTEXT = { additionalTypenames: ['WebhookEndpoint'] };
const DELIVERY_CONTEXT = { additionalTypenames: ['WebhookDelivery'] };
// The limit is written into the query: the server costs a variable limit at its maximum (500)
// and refuses 500 deliveries with their attempts as too complex.
const ROW_STYLE = { display: 'flex', flexWrap: 'wrap', gap: 6, alignItems: 'center' } as const;

/** The console side of webhooks (docs/api-contract.md#webhooks): endpoints, the signing secret, test sends and the delivery log. */
export function Webhooks() {
  return (
    <section>
      <header className="page-header"><h1>Webhooks</h1></header>
      <p className="muted">
        Every request event of the workspace (<code>request.completed</code>, <code>request.failed</code>, <code>request.canceled</code>) is POSTed to each enabled endpoint,
        signed with the workspace secret in <code>X-Service-Signature</code>.
      </p>
      <Endpoints />
      <SigningSecret />
      <DeliveryLog />
    </section>
  );
}

function Endpoints() {
  const [{ data, fetching, stale, error }, refetch] = useQuery({ query: ENDPOINTS, context: ENDPOINT_CONTEXT });
  const [{ data: logged }] = useSubscription({ query: DELIVERY_LOGGED });
  const [url, setUrl] = useState('');
  const [description, setDescription] = useState('');
  const [created, create] = useMutation(CREATE_ENDPOINT);
  const [updated, update] = useMutation(UPDATE_ENDPOINT);
  const [deleted, remove] = useMutation(DELETE_ENDPOINT);
  const [tested, sendTest] = useMutation(SEND_TEST);

  const refetchWhenIdle = useRefetchWhenIdle(fetching || stale, refetch);
  // A delivery's outcome moves the failure count and may disable the endpoint.
  useEffect(() => {
    if (logged) refetchWhenIdle();
  }, [logged]);
  // A read started before a change committed may answer after it: read again once idle.
  const changed = <T,>(result: Promise<{ data?: T }>) => void result.then((outcome) => outcome.data && refetchWhenIdle());

  const submit = async (event: React.FormEvent) => {
    event.preventDefault();
    const result = await create({ input: { url: url.trim(), description } });
    if (result.data) {
      refetchWhenIdle();
      setUrl('');
      setDescription('');
    }
  };

  return (
    <>
      <h2>Endpoints</h2>
      {error && <ErrorView error={error} title="The endpoints could not be loaded" />}
      {!data && fetching && <Loading what="endpoints" />}
      {data && data.webhookEndpoints.length === 0 && <Empty>No endpoints yet. Add a public HTTPS URL below to receive every request event.</Empty>}
      {updated.error && <ErrorView error={updated.error} title="The endpoint was not changed" />}
      {deleted.error && <ErrorView error={deleted.error} title="The endpoint was not deleted" />}
      {tested.error && <ErrorView error={tested.error} title="The test was not sent" />}
      {tested.data && (
        <p role="status">Test event sent to <code>{tested.data.sendTestWebhook.url}</code>: delivery <code>{tested.data.sendTestWebhook.id}</code>; its attempts appear in the delivery log below.</p>
      )}
      {data && data.webhookEndpoints.length > 0 && (
        <TableScroll><table>
          <thead><tr><th>URL</th><th>Description</th><th>State</th><th><span className="muted">Actions</span></th></tr></thead>
          <tbody>
            {data.webhookEndpoints.map((endpoint) => {
              const automatic = !endpoint.enabled && endpoint.disabledReason !== 'disabled by a user';
              return (
                <tr key={endpoint.id}>
                  <td><code>{endpoint.url}</code></td>
                  <td>{endpoint.description || <span className="muted">—</span>}</td>
                  <td>
                    <span className={`status ${endpoint.enabled ? 'status-running' : 'status-failed'}`}>{endpoint.enabled ? 'Enabled' : 'Disabled'}</span>
                    {endpoint.disabledReason && <><br /><span className="muted">{endpoint.disabledReason}</span></>}
                    {endpoint.consecutiveFailures > 0 && <><br /><span className="muted">{endpoint.consecutiveFailures} failed in a row</span></>}
                  </td>
                  <td>
                    <div style={ROW_STYLE}>
                      <button type="button" aria-label={`Send test to ${endpoint.url}`} onClick={() => void sendTest({ endpointId: endpoint.id })} disabled={tested.fetching}>Send test</button>
                      {endpoint.enabled
                        ? <button type="button" aria-label={`Disable ${endpoint.url}`} onClick={() => changed(update({ id: endpoint.id, input: { enabled: false } }))}>Disable</button>
                        : <button type="button" aria-label={`${automatic ? 'Re-enable' : 'Enable'} ${endpoint.url}`} onClick={() => changed(update({ id: endpoint.id, input: { enabled: true } }))}>{automatic ? 'Re-enable' : 'Enable'}</button>}
                      <ConfirmButton label="Delete" question={`Delete ${endpoint.url}? Its delivery log stays.`} onConfirm={() => changed(remove({ id: endpoint.id }, ENDPOINT_CONTEXT))} />
                    </div>
                  </td>
                </tr>
              );
            })}
          </tbody>
        </table></TableScroll>
      )}
      <form onSubmit={submit} aria-labelledby="add-endpoint-heading">
        <h3 id="add-endpoint-heading">Add an endpoint</h3>
        <Field id="endpoint-url" label="URL" hint="Public HTTPS" type="url" value={url} onChange={setUrl} required error={fieldError(created.error, 'url')} />
        <Field id="endpoint-description" label="Description" hint="Optional" value={description} onChange={setDescription} error={fieldError(created.error, 'description')} />
        <p><button type="submit" disabled={!url.trim() || created.fetching}>{created.fetching ? 'Adding…' : 'Add endpoint'}</button></p>
        <UnplacedError error={created.error} params={['url', 'description']} title="The endpoint was not added" />
      </form>
    </>
  );
}

/** Hidden until asked: the secret is fetched only when revealed, and forgotten when hidden. */
function SigningSecret() {
  const [revealed, setRevealed] = useState(false);
  const [{ data, fetching, error }] = useQuery({ query: SIGNING_SECRET, pause: !revealed, requestPolicy: 'network-only' });
  const [grace, setGrace] = useState('86400');
  const [graceProblem, setGraceProblem] = useState<string | null>(null);
  const [rotated, rotate] = useMutation(ROTATE_SECRET);
  const secret = rotated.data?.rotateWebhookSigningSecret ?? data?.webhookSigningSecret;

  const onRotate = () => {
    const text = grace.trim();
    if (text !== '' && !/^\d+$/.test(text)) {
      setGraceProblem('The grace period must be a whole number of seconds');
      return;
    }
    setGraceProblem(null);
    void rotate({ graceSeconds: text === '' ? null : Number(text) });
  };
  const graceError = graceProblem ?? fieldError(rotated.error, 'graceSeconds');

  return (
    <>
      <h2>Signing secret</h2>
      <p className="muted">Receivers check <code>X-Service-Signature</code> (<code>t=…,v1=…</code>, HMAC-SHA256 over <code>t.</code> and the raw body) with this secret.</p>
      {!revealed && <p><button type="button" onClick={() => setRevealed(true)}>Reveal signing secret</button></p>}
      {revealed && (
        <div>
          {error && <ErrorView error={error} title="The secret could not be revealed" />}
          {!secret && fetching && <Loading what="the signing secret" />}
          {secret && (
            <>
              <p className="secret" data-testid="signing-secret">{secret.secret}</p>
              <p className="muted">
                Rotated {formatTime(secret.rotatedAt)}
                {secret.previousExpiresAt && new Date(secret.previousExpiresAt) > new Date() && <>; the previous secret also signs until {formatTime(secret.previousExpiresAt)}</>}.
              </p>
            </>
          )}
          <div style={ROW_STYLE}>
            {secret && <CopyButton text={secret.secret} label="Copy secret" />}
            <button type="button" onClick={() => setRevealed(false)}>Hide signing secret</button>
          </div>
        </div>
      )}
      <h3>Rotate</h3>
      <div>
        <label htmlFor="grace-seconds">Grace period (seconds)</label>
        <input id="grace-seconds" inputMode="numeric" value={grace} onChange={(event) => setGrace(event.target.value)}
          aria-invalid={graceError ? true : undefined} aria-describedby={`grace-seconds-hint${graceError ? ' grace-seconds-error' : ''}`} />
        <span id="grace-seconds-hint" className="muted"> The previous secret keeps signing this long (default 24 h, at most 7 days)</span>
        {graceError && <p id="grace-seconds-error" className="field-error">{graceError}</p>}
      </div>
      <p>
        <ConfirmButton label="Rotate secret" question={`Rotate the signing secret? Receivers must switch to the new one within ${grace.trim() || '86400'} seconds.`} onConfirm={onRotate} disabled={rotated.fetching} />
      </p>
      {rotated.data && <p role="status">Rotated. {revealed ? 'The new secret is shown above.' : 'Reveal it to copy it.'}</p>}
      <UnplacedError error={rotated.error} params={['graceSeconds']} title="The secret was not rotated" />
    </>
  );
}

function DeliveryLog() {
  const [endpointId, setEndpointId] = useState('');
  const [{ data: endpoints }] = useQuery({ query: ENDPOINTS, context: ENDPOINT_CONTEXT });
  const [{ data, fetching, stale, error }, refetch] = useQuery({
    query: DELIVERIES, variables: { endpointId: endpointId || null }, context: DELIVERY_CONTEXT,
  });
  const [{ data: logged }] = useSubscription({ query: DELIVERY_LOGGED });
  const refetchWhenIdle = useRefetchWhenIdle(fetching || stale, refetch);

  // Every attempt logged re-reads the log: a new delivery, or a retry of one already shown.
  useEffect(() => {
    if (logged) refetchWhenIdle();
  }, [logged]);

  return (
    <>
      <h2>Delivery log</h2>
      <p className="muted">Newest first; attempts appear here as they are logged.</p>
      <div>
        <label htmlFor="delivery-endpoint">Endpoint</label>
        <select id="delivery-endpoint" value={endpointId} onChange={(event) => setEndpointId(event.target.value)}>
          <option value="">All deliveries</option>
          {endpoints?.webhookEndpoints.map((endpoint) => <option key={endpoint.id} value={endpoint.id}>{endpoint.url}</option>)}
        </select>
      </div>
      {error && <ErrorView error={error} title="The delivery log could not be loaded" />}
      {!data && fetching && <Loading what="deliveries" />}
      {data && data.webhookDeliveries.length === 0 && <Empty>No deliveries yet. Send a test to an endpoint to see one here.</Empty>}
      {data && data.webhookDeliveries.length > 0 && (
        <TableScroll><table aria-label="Deliveries" style={{ marginTop: 12 }}>
          <thead><tr><th>Event</th><th>URL</th><th>Status</th><th>Attempts</th><th>Latency</th><th>Created</th></tr></thead>
          <tbody>
            {data.webhookDeliveries.map((delivery) => {
              const last = delivery.attemptLog[delivery.attemptLog.length - 1];
              return (
                <tr key={delivery.id} data-delivery-id={delivery.id}>
                  <td><code>{delivery.eventType}</code><br /><span className="muted">{delivery.target}</span></td>
                  <td><code style={{ wordBreak: 'break-all' }}>{delivery.url}</code></td>
                  <td>
                    <span className={`status ${delivery.status === 'succeeded' ? 'status-running' : delivery.status === 'failed' ? 'status-failed' : ''}`}>{delivery.status}</span>
                    {delivery.lastStatusCode !== null && delivery.lastStatusCode !== undefined && <> <span>HTTP {delivery.lastStatusCode}</span></>}
                    {delivery.lastError && <><br /><span className="muted">{delivery.lastError}</span></>}
                  </td>
                  <td>{delivery.attempts}</td>
                  <td>{last ? `${last.latencyMs} ms` : '—'}</td>
                  <td>
                    {formatTime(delivery.createdAt)}
                    <details>
                      <summary>Attempts and body</summary>
                      <AttemptLog attempts={delivery.attemptLog} />
                    </details>
                  </td>
                </tr>
              );
            })}
          </tbody>
        </table></TableScroll>
      )}
    </>
  );
}

interface Attempt { id: string; attempt: number; statusCode?: number | null; error?: string | null; latencyMs: number; succeeded: boolean; requestBody: string; signature: string; createdAt: string }

function AttemptLog({ attempts }: { attempts: Attempt[] }) {
  if (attempts.length === 0) return <p className="muted">No attempt yet.</p>;
  return (
    <ol style={{ paddingLeft: 20 }}>
      {attempts.map((attempt) => (
        <li key={attempt.id}>
          Attempt {attempt.attempt}: {attempt.succeeded ? 'succeeded' : 'failed'}, {attempt.statusCode !== null && attempt.statusCode !== undefined ? `HTTP ${attempt.statusCode}` : 'no answer'}, {attempt.latencyMs} ms
          {attempt.error && <> — {attempt.error}</>}
          <br /><span className="muted">{formatTime(attempt.createdAt)} · signature <code style={{ wordBreak: 'break-all' }}>{attempt.signature}</code></span>
          <pre style={{ maxWidth: 560, whiteSpace: 'pre-wrap', wordBreak: 'break-all' }}>{pretty(attempt.requestBody)}</pre>
        </li>
      ))}
    </ol>
  );
}

function pretty(body: string): string {
  try {
    return JSON.stringify(JSON.parse(body), null, 2);
  } catch {
    return body;
  }
}
