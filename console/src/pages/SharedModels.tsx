import { useId, useMemo, useState } from 'react';
import { useMutation, useQuery, useSubscription } from 'urql';
import { graphql } from '../gql';
import { ConfirmButton } from '../components/ConfirmButton';
import { CopyButton } from '../components/CopyButton';
import { Empty, ErrorView, fieldError, Loading } from '../components/states';
import { sumDecimals } from '../components/format';
import { Money } from '../components/Money';

const SHARED_MODELS = graphql(`
  query SharedModelsList {
    sharedModels { id modelId inputPricePerMillion outputPricePerMillion availability idleGuestSlots }
  }
`);

const SHARED_MODEL_UPDATED = graphql(`
  subscription SharedModelUpdated {
    sharedModelUpdated { id modelId inputPricePerMillion outputPricePerMillion availability idleGuestSlots }
  }
`);

const OWNER_SHARING = graphql(`
  query OwnerSharing($from: DateTimeISO!, $to: DateTimeISO!) {
    deployments { id slug modelId status provider shareIdleCapacity sharing updatedAt replicas { id status } }
    sharingEarnings(from: $from, to: $to, groupBy: DEPLOYMENT) { key requests promptTokens completionTokens earnings }
  }
`);

const DEPLOYMENT_SHARING_UPDATED = graphql(`
  subscription DeploymentSharingUpdated {
    deploymentUpdated { id status shareIdleCapacity sharing updatedAt }
  }
`);

const SET_SHARING = graphql(`
  mutation SetDeploymentSharing($id: ID!, $share: Boolean!) {
    updateDeployment(id: $id, input: { shareIdleCapacity: $share }) { id status shareIdleCapacity sharing updatedAt }
  }
`);

const DAY_MS = 86_400_000;
/** Re-read after any mutation that returns a Deployment (even while the list is empty); a constant, so renders do not re-run it. */
const OWNER_CONTEXT = { additionalTypenames: ['Deployment'] };

const STYLES = {
  card: { background: '#fff', border: '1px solid #dde1e6', borderRadius: '8px', padding: '12px 16px', margin: '12px 0' },
  row: { display: 'flex', flexWrap: 'wrap', alignItems: 'center', gap: '8px' },
  number: { textAlign: 'right', fontVariantNumeric: 'tabular-nums', whiteSpace: 'nowrap' },
  caption: { textAlign: 'left', fontWeight: 600, padding: '8px 0' },
  scroll: { overflowX: 'auto' },
  pre: { margin: '8px 0' },
} satisfies Record<string, React.CSSProperties>;

/** Badge colours: dark text on light fills (over 7:1), the state in words too. */
const AVAILABILITY_STYLES: Record<string, React.CSSProperties> = {
  Available: { background: '#dff5e3', color: '#0d4a1c' },
  Degraded: { background: '#fff1c7', color: '#5c4200' },
  Unavailable: { background: '#fdeeee', color: '#8a0000' },
};
const SHARING_LABELS: Record<string, string> = { not_shared: 'Not shared', activating: 'Sharing: Activating...', shared: 'Shared' };
const SHARING_STYLES: Record<string, React.CSSProperties> = {
  not_shared: { background: '#eceff3', color: '#1b1f24' },
  activating: { background: '#fff1c7', color: '#5c4200' },
  shared: { background: '#dff5e3', color: '#0d4a1c' },
};
/** Providers whose replicas the platform launches (the only ones that can be shared). */
const SHAREABLE_PROVIDERS = new Set(['local', 'market', 'static']);

type SharedModel = { id: string; modelId: string; inputPricePerMillion: string; outputPricePerMillion: string; availability: string; idleGuestSlots: number };
type SharingUpdate = { id: string; status: string; shareIdleCapacity: boolean; sharing: string; updatedAt: string };

/** The newer of two views of a deployment (the query's, a mutation's answer, a live update): by updatedAt, a tie to the later one. */
function newer<T extends { updatedAt: string }>(base: T, update: SharingUpdate | undefined): T {
  return update && update.updatedAt >= base.updatedAt ? { ...base, ...update } : base;
}

export function sdkSnippet(baseUrl: string, modelId: string): string {
  return `import OpenAI from 'openai';

// Any key of your workspace; shared calls are billed per token against its credit.
const client = new OpenAI({ baseURL: '${baseUrl}', apiKey: process.env.INFERENCE_API_KEY });

const completion = await client.chat.completions.create({
  model: '${modelId}',
  messages: [{ role: 'user', content: 'Hello!' }],
  max_tokens: 64,
});
console.log(completion.choices[0].message.content);
`;
}

/**
 * Shared serving: the models any workspace can call per token at /shared/v1 (prices, live
 * availability), and the owner's side: which deployments share their idle capacity, turning it
 * on or off, and what guests paid.
 */
export function SharedModels() {
  const sharedBaseUrl = `${window.location.origin}/shared/v1`;
  const [models] = useQuery({ query: SHARED_MODELS });
  const [live] = useSubscription({ query: SHARED_MODEL_UPDATED }, (previous: Record<string, SharedModel> = {}, data) =>
    ({ ...previous, [data.sharedModelUpdated.id]: data.sharedModelUpdated }));
  const sharedModels = useMemo(
    () => (models.data?.sharedModels ?? []).map((model) => live.data?.[model.id] ?? model),
    [models.data, live.data],
  );
  const [exampleChoice, setExampleChoice] = useState<string | null>(null);
  const exampleModel = exampleChoice ?? sharedModels[0]?.id ?? 'shared/meta-llama/Llama-3.1-8B-Instruct';
  const snippet = sdkSnippet(sharedBaseUrl, exampleModel);
  const exampleSelect = useId();

  return (
    <section>
      <header className="page-header"><h1>Shared models</h1></header>
      <p>
        Call models that other workspaces share from their idle capacity, billed per token against this workspace's
        credit (no deployment of your own needed). Guests never see owners, and owners never see guests' prompts.
      </p>

      <section aria-labelledby="endpoint-heading" style={STYLES.card}>
        <h2 id="endpoint-heading">Endpoint</h2>
        <div style={STYLES.row}>
          <span id="shared-base-url-label">Base URL</span>
          <code aria-labelledby="shared-base-url-label" data-testid="shared-base-url">{sharedBaseUrl}</code>
          <CopyButton text={sharedBaseUrl} label="Copy base URL" />
        </div>
        <p className="muted">
          Use <code>model: "shared/&lt;model-id&gt;"</code> with any OpenAI SDK and one of your workspace's keys. When no idle
          slot is free the call answers 429 <code>shared_pool_busy</code> at once (retry after a few seconds); out of credit, 402.
        </p>
        {sharedModels.length > 1 && (
          <>
            <label htmlFor={exampleSelect}>Model in the example</label>
            <select id={exampleSelect} value={exampleModel} onChange={(event) => setExampleChoice(event.target.value)}>
              {sharedModels.map((model) => <option key={model.id} value={model.id}>{model.id}</option>)}
            </select>
          </>
        )}
        <h3 id="snippet-heading">SDK example (TypeScript)</h3>
        <pre style={STYLES.pre} aria-labelledby="snippet-heading" tabIndex={0}><code>{snippet}</code></pre>
        <CopyButton text={snippet} label="Copy SDK snippet" />
      </section>

      <section aria-labelledby="models-heading">
        <h2 id="models-heading">Models you can call</h2>
        {models.error && <ErrorView error={models.error} title="Shared models could not be loaded" />}
        {!models.data && models.fetching && <Loading what="shared models" />}
        {models.data && sharedModels.length === 0 && <Empty>No model can be shared on this platform yet.</Empty>}
        {sharedModels.length > 0 && (
          <div style={STYLES.scroll}>
            <table>
              <caption style={STYLES.caption}>Shared models, prices in USD per 1M tokens; availability updates live</caption>
              <thead>
                <tr>
                  <th scope="col">Model</th>
                  <th scope="col" style={STYLES.number}>Input / 1M tokens</th>
                  <th scope="col" style={STYLES.number}>Output / 1M tokens</th>
                  <th scope="col">Availability</th>
                  <th scope="col" style={STYLES.number}>Idle guest slots</th>
                </tr>
              </thead>
              <tbody>
                {sharedModels.map((model) => (
                  <tr key={model.id} data-testid="shared-model-row">
                    <th scope="row"><code>{model.id}</code></th>
                    <td style={STYLES.number}>${model.inputPricePerMillion}</td>
                    <td style={STYLES.number}>${model.outputPricePerMillion}</td>
                    <td><span className="badge" style={AVAILABILITY_STYLES[model.availability]}>{model.availability}</span></td>
                    <td style={STYLES.number}>{model.idleGuestSlots}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        )}
        {live.error && <ErrorView error={live.error} title="Live availability updates stopped" />}
      </section>

      <OwnerSharing sharedModelIds={new Set(sharedModels.map((model) => model.modelId))} modelsLoaded={models.data !== undefined} />
    </section>
  );
}

/** The owner's side: share a deployment's idle capacity (a rolling restart) and what guests paid for it. */
function OwnerSharing({ sharedModelIds, modelsLoaded }: { sharedModelIds: Set<string>; modelsLoaded: boolean }) {
  const range = useMemo(() => {
    const to = new Date(Math.ceil(Date.now() / DAY_MS) * DAY_MS + DAY_MS);
    return { from: new Date(to.getTime() - 31 * DAY_MS).toISOString(), to: to.toISOString() };
  }, []);
  const [owner, refetch] = useQuery({ query: OWNER_SHARING, variables: range, context: OWNER_CONTEXT });
  const [answers, setAnswers] = useState<Record<string, SharingUpdate>>({});
  const [live] = useSubscription({ query: DEPLOYMENT_SHARING_UPDATED }, (previous: Record<string, SharingUpdate> = {}, data) =>
    ({ ...previous, [data.deploymentUpdated.id]: data.deploymentUpdated }));
  const [changing, setSharing] = useMutation(SET_SHARING);
  const [changingId, setChangingId] = useState<string | null>(null);

  const change = async (id: string, share: boolean) => {
    setChangingId(id);
    const result = await setSharing({ id, share });
    if (result.data) {
      const update = result.data.updateDeployment;
      setAnswers((current) => ({ ...current, [id]: update }));
    }
    setChangingId(null);
  };

  const deployments = (owner.data?.deployments ?? [])
    .filter((deployment) => deployment.status !== 'Deleted')
    .map((deployment) => newer(newer(deployment, answers[deployment.id]), live.data?.[deployment.id]))
    .filter((deployment) => deployment.status !== 'Deleted');
  const eligible = deployments.filter((deployment) => sharedModelIds.has(deployment.modelId) && SHAREABLE_PROVIDERS.has(deployment.provider));
  const names = new Map(deployments.map((deployment) => [deployment.id, `${deployment.modelId} (${deployment.slug})`]));
  const earnings = owner.data?.sharingEarnings ?? [];
  const changeError = changing.error;

  return (
    <>
      <section aria-labelledby="owner-heading">
        <h2 id="owner-heading">Share your deployments</h2>
        <p className="muted">
          Opening a deployment's idle capacity restarts its replicas one at a time to turn on priority scheduling (your own
          requests always run first). With a single replica its endpoint answers 503 for the restart. You are credited
          100 % of what guests pay.
        </p>
        {owner.error && <ErrorView error={owner.error} title="Your deployments could not be loaded" />}
        {!owner.data && owner.fetching && <Loading what="your deployments" />}
        {owner.data && modelsLoaded && eligible.length === 0 && (
          <Empty>None of your deployments can be shared: only deployments of the models above, on replicas the platform launches, can.</Empty>
        )}
        {changeError && !fieldError(changeError, 'shareIdleCapacity') && <ErrorView error={changeError} title="Sharing could not be changed" />}
        {fieldError(changeError, 'shareIdleCapacity') && <p role="alert" className="error">{fieldError(changeError, 'shareIdleCapacity')}</p>}
        {eligible.length > 0 && (
          <div style={STYLES.scroll}>
            <table>
              <caption style={STYLES.caption}>Your deployments that can share idle capacity</caption>
              <thead>
                <tr><th scope="col">Deployment</th><th scope="col">Status</th><th scope="col">Replicas</th><th scope="col">Sharing</th><th scope="col">Action</th></tr>
              </thead>
              <tbody>
                {eligible.map((deployment) => {
                  const running = deployment.replicas.filter((replica) => replica.status === 'Running').length;
                  const label = `${deployment.modelId} (${deployment.slug})`;
                  return (
                    <tr key={deployment.id} data-testid={`sharing-${deployment.id}`}>
                      <th scope="row">{label}</th>
                      <td>{deployment.status}</td>
                      <td>{running} running</td>
                      <td>
                        <span aria-live="polite">
                          <span className="badge" data-testid="sharing-state" style={SHARING_STYLES[deployment.sharing]}>
                            {SHARING_LABELS[deployment.sharing] ?? deployment.sharing}
                          </span>
                        </span>
                      </td>
                      <td>
                        {deployment.shareIdleCapacity
                          ? <ConfirmButton label="Stop sharing" question={`Stop admitting guests to ${label}?`}
                            disabled={changingId !== null} onConfirm={() => void change(deployment.id, false)} />
                          : <ConfirmButton label="Share idle capacity"
                            question={running <= 1
                              ? `Restart ${label} to share it? Its only replica restarts: the endpoint answers 503 for a few minutes.`
                              : `Restart ${label}'s replicas one at a time to share it?`}
                            disabled={changingId !== null || deployment.status === 'Paused'} onConfirm={() => void change(deployment.id, true)} />}
                      </td>
                    </tr>
                  );
                })}
              </tbody>
            </table>
          </div>
        )}
      </section>

      <section aria-labelledby="earnings-heading">
        <div className="page-header">
          <h2 id="earnings-heading">Your earnings, last 30 days</h2>
          <button type="button" onClick={() => refetch({ requestPolicy: 'network-only' })}>Refresh earnings</button>
        </div>
        {owner.data && earnings.length === 0 && <Empty>No guest has used your shared deployments in the last 30 days.</Empty>}
        {earnings.length > 0 && (
          <div style={STYLES.scroll}>
            <table>
              <caption style={STYLES.caption}>What guests paid for your shared deployments (100 % credited to you)</caption>
              <thead>
                <tr>
                  <th scope="col">Deployment</th>
                  <th scope="col" style={STYLES.number}>Guest requests</th>
                  <th scope="col" style={STYLES.number}>Prompt tokens</th>
                  <th scope="col" style={STYLES.number}>Completion tokens</th>
                  <th scope="col" style={STYLES.number}>Earnings</th>
                </tr>
              </thead>
              <tbody>
                {earnings.map((row) => (
                  <tr key={row.key}>
                    <th scope="row">{names.get(row.key) ?? `${row.key} (deleted)`}</th>
                    <td style={STYLES.number}>{row.requests.toLocaleString('en-US')}</td>
                    <td style={STYLES.number}>{row.promptTokens.toLocaleString('en-US')}</td>
                    <td style={STYLES.number}>{row.completionTokens.toLocaleString('en-US')}</td>
                    <td style={STYLES.number}><Money amount={row.earnings} /></td>
                  </tr>
                ))}
              </tbody>
              <tfoot>
                <tr>
                  <th scope="row">Total</th>
                  <td style={STYLES.number}>{earnings.reduce((sum, row) => sum + row.requests, 0).toLocaleString('en-US')}</td>
                  <td style={STYLES.number}>{earnings.reduce((sum, row) => sum + row.promptTokens, 0).toLocaleString('en-US')}</td>
                  <td style={STYLES.number}>{earnings.reduce((sum, row) => sum + row.completionTokens, 0).toLocaleString('en-US')}</td>
                  <td style={STYLES.number}><Money amount={sumDecimals(earnings.map((row) => row.earnings))} /></td>
                </tr>
              </tfoot>
            </table>
          </div>
        )}
      </section>
    </>
  );
}
