import { useEffect, useMemo, useRef, useState } from 'react';
import { Link } from 'react-router-dom';
import { useMutation, useQuery, useSubscription } from 'urql';
import { graphql } from '../gql';
import type { AdapterPartsFragment, AdaptersQuery } from '../gql/graphql';
import { AdapterResidency } from '../components/AdapterResidency';
import {
  AdapterWeightsFields, EMPTY_WEIGHTS, rankProblem, UPLOAD_PARAMS, uploadDeployment, WEIGHTS_PARAMS, weightsInput, type WeightsValues,
} from '../components/AdapterWeightsFields';
import { useWeightsUpload } from '../components/weights-upload';
import { ConfirmButton } from '../components/ConfirmButton';
import { Field, UnplacedError } from '../components/Field';
import { Empty, ErrorView, fieldError, Loading } from '../components/states';
import { ADAPTER_CONTEXT, ATTACH_ADAPTER, DETACH_ADAPTER } from '../graphql/adapters';
import { useRefetchWhenIdle } from '../graphql/use-refetch-when-idle';

/**
 * Usage of every adapter in one aggregate (by adapter, the workspace's own calls): `Adapter.usage`
 * under the list would cost an aggregate per adapter, over the operation's database budget.
 */
const ADAPTERS = graphql(`
  query Adapters($from: DateTimeISO!, $to: DateTimeISO!) {
    adapters { ...AdapterParts }
    usage(from: $from, to: $to, groupBy: "adapter") { key requests promptTokens completionTokens totalTokens }
    deployments { id slug modelId status }
    catalog { id name task }
  }
`);

/** A shared adapter's usage counts its guests' calls too (`Adapter.usage`): one aggregate, for that card only. */
const SHARED_USAGE = graphql(`
  query AdapterUsage($id: ID!, $from: DateTimeISO!, $to: DateTimeISO!) {
    adapter(id: $id) { id usage(from: $from, to: $to) { requests promptTokens completionTokens totalTokens } }
  }
`);

const ADAPTERS_LIVE = graphql(`
  subscription AdaptersLive { adapterUpdated { ...AdapterParts } }
`);

const CREATE = graphql(`
  mutation CreateAdapter($input: CreateAdapterInput!) { createAdapter(input: $input) { ...AdapterParts } }
`);

const UPDATE_WEIGHTS = graphql(`
  mutation UpdateAdapterWeights($id: ID!, $input: AdapterWeightsInput!) { updateAdapterWeights(id: $id, input: $input) { ...AdapterParts } }
`);

const SET_SHARING = graphql(`
  mutation SetAdapterSharing($id: ID!, $shared: Boolean!) { setAdapterSharing(id: $id, shared: $shared) { ...AdapterParts } }
`);

const DELETE = graphql(`
  mutation DeleteAdapter($id: ID!) { deleteAdapter(id: $id) { id deleted } }
`);

type Listed = AdaptersQuery['adapters'][number];
type Usage = Omit<AdaptersQuery['usage'][number], 'key'>;
const NO_USAGE: Usage = { requests: 0, promptTokens: 0, completionTokens: 0, totalTokens: 0 };
type Deployment = AdaptersQuery['deployments'][number];

/** Usage ranges offered; the list reads usage over the chosen one, from when the page opened. */
const RANGES = [['1', 'Last 24 hours'], ['7', 'Last 7 days'], ['30', 'Last 30 days']] as const;
const DAY_MS = 86_400_000;
/** Residency comes from heartbeats, which fire no adapter event: re-read it this often. */
const RESIDENCY_REREAD_MS = 5_000;

const count = (value: number) => value.toLocaleString('en-US');
const deploymentLabel = (deployment: Pick<Deployment, 'modelId' | 'slug'>) => `${deployment.modelId} (${deployment.slug})`;

/**
 * The workspace's LoRA adapters (docs/adapters.md), live: a change made anywhere (another tab,
 * the API, another server) arrives over `adapterUpdated` and replaces the card; one the list does
 * not have, or one deleted, re-reads it. Residency (per replica, from heartbeats) and usage are
 * re-read every few seconds.
 */
export function Adapters() {
  const [days, setDays] = useState<string>('7');
  // Fixed while the page is open (a new `to` every read would make urql start over each time): `to` is a day ahead.
  const opened = useMemo(() => Date.now(), []);
  const variables = useMemo(() => ({ from: new Date(opened - Number(days) * DAY_MS).toISOString(), to: new Date(opened + DAY_MS).toISOString() }), [opened, days]);
  const [{ data, fetching, stale, error }, refetch] = useQuery({ query: ADAPTERS, variables, context: ADAPTER_CONTEXT });
  const reread = useRefetchWhenIdle(fetching || stale, refetch);
  const [live, setLive] = useState<Record<string, AdapterPartsFragment>>({});
  const listed = useRef(new Set<string>());
  listed.current = new Set(data?.adapters.map((adapter) => adapter.id));
  const [updates] = useSubscription({ query: ADAPTERS_LIVE }, (_previous: unknown, event) => {
    const changed = event.adapterUpdated;
    setLive((current) => ({ ...current, [changed.id]: changed }));
    if (changed.deleted || !listed.current.has(changed.id)) reread();
    return event;
  });
  useEffect(() => {
    const timer = setInterval(reread, RESIDENCY_REREAD_MS);
    return () => clearInterval(timer);
  }, [reread]);

  const rows: Listed[] = (data?.adapters ?? [])
    .map((adapter) => (live[adapter.id] && live[adapter.id].updatedAt >= adapter.updatedAt ? { ...adapter, ...live[adapter.id] } : adapter))
    .filter((adapter) => !adapter.deleted && !live[adapter.id]?.deleted);
  const deployments = (data?.deployments ?? []).filter((deployment) => deployment.status !== 'Deleted');
  const textModels = (data?.catalog ?? []).filter((model) => model.task === 'chat' || model.task === 'completion');
  const usage = new Map((data?.usage ?? []).map((row) => [row.key, row]));

  return (
    <section>
      <header className="page-header">
        <h1>Adapters</h1>
        <span className="actions">
          <label htmlFor="usage-range" style={{ display: 'inline', margin: 0 }}>Usage over</label>
          <select id="usage-range" value={days} onChange={(event) => setDays(event.target.value)}>
            {RANGES.map(([value, label]) => <option key={value} value={value}>{label}</option>)}
          </select>
        </span>
      </header>
      <p className="muted">
        LoRA fine-tunes of a base model, served by its deployments: clients put an adapter&apos;s name in <code>model</code>.
        The agent loads one where a request needs it, without a restart.
      </p>
      {error && <ErrorView error={error} title="The adapters could not be read" />}
      {updates.error && <ErrorView error={updates.error} title="Live updates stopped; reload the page to resume them" />}
      {!data && fetching && <Loading what="adapters" />}
      {data && rows.length === 0 && <Empty>No adapters yet. Register one below.</Empty>}
      {data && rows.map((adapter) => (
        <AdapterCard key={adapter.id} adapter={adapter} deployments={deployments} days={days} ownUsage={usage.get(adapter.id) ?? NO_USAGE} variables={variables} />
      ))}
      {data && <RegisterAdapter models={textModels} deployments={deployments} />}
    </section>
  );
}

function AdapterCard({ adapter, deployments, days, ownUsage, variables }: {
  adapter: Listed; deployments: Deployment[]; days: string; ownUsage: Usage; variables: { from: string; to: string };
}) {
  const [attached, attach] = useMutation(ATTACH_ADAPTER);
  const [detached, detach] = useMutation(DETACH_ADAPTER);
  const [sharing, setSharing] = useMutation(SET_SHARING);
  const [deleted, remove] = useMutation(DELETE);
  const [target, setTarget] = useState('');
  const attachedIds = new Set(adapter.deployments.map((deployment) => deployment.id));
  // Only deployments of its base model can serve it (the API refuses others).
  const offered = deployments.filter((deployment) => deployment.modelId === adapter.baseModel && !attachedIds.has(deployment.id));
  const names = new Map(deployments.map((deployment) => [deployment.id, deploymentLabel(deployment)]));
  const busy = attached.fetching || detached.fetching || sharing.fetching || deleted.fetching;
  const actionError = attached.error ?? detached.error ?? sharing.error ?? deleted.error;
  const headingId = `adapter-${adapter.id}`;
  // Re-read with the list (its `ownUsage` changes): the shared adapter's guests' calls come with it.
  const [shared, refetchShared] = useQuery({ query: SHARED_USAGE, variables: { id: adapter.id, ...variables }, pause: !adapter.sharedWithGuests });
  useEffect(() => {
    if (adapter.sharedWithGuests) refetchShared({ requestPolicy: 'network-only' });
  }, [ownUsage.requests, ownUsage.totalTokens, adapter.sharedWithGuests, refetchShared]);
  const usage = adapter.sharedWithGuests && shared.data ? shared.data.adapter.usage : ownUsage;
  const whose = adapter.sharedWithGuests && shared.data ? 'yours and guests\'' : 'this workspace\'s';
  const range = RANGES.find(([value]) => value === days)?.[1].toLowerCase() ?? '';

  return (
    <article aria-labelledby={headingId} className="card" data-testid="adapter-card">
      <header className="page-header">
        <h2 id={headingId} style={{ margin: 0 }}><code>{adapter.name}</code></h2>
        {adapter.sharedWithGuests && <span className="badge">Shared with guests</span>}
      </header>
      <dl className="facts">
        <dt>Base model</dt><dd><code>{adapter.baseModel}</code></dd>
        <dt>Rank</dt><dd>{adapter.rank}</dd>
        <dt>Format</dt><dd>{adapter.format}</dd>
        <dt>Revision</dt><dd>r{adapter.revision}</dd>
        <dt>Weights</dt><dd><code className="id">{adapter.source}</code>{adapter.sizeBytes ? ` · ${count(adapter.sizeBytes)} bytes` : ''}</dd>
        <dt>Usage, {range}</dt>
        <dd data-testid="adapter-usage">
          {count(usage.requests)} {usage.requests === 1 ? 'request' : 'requests'}, {count(usage.totalTokens)} tokens ({count(usage.promptTokens)} prompt, {count(usage.completionTokens)} completion)
          <span className="muted">, {whose} calls</span>
        </dd>
      </dl>

      <h3>Attached to</h3>
      {adapter.deployments.length === 0
        ? <p className="muted">No deployment: requests naming it are refused until it is attached to one of its base model.</p>
        : (
          <ul aria-label={`Deployments ${adapter.name} is attached to`}>
            {adapter.deployments.map((deployment) => (
              <li key={deployment.id} className="actions">
                <Link to={`/deployments/${deployment.id}`}>{names.get(deployment.id) ?? deployment.name}</Link>
                <button type="button" disabled={busy} aria-label={`Detach ${adapter.name} from ${names.get(deployment.id) ?? deployment.name}`}
                  onClick={() => void detach({ adapterId: adapter.id, deploymentId: deployment.id }, ADAPTER_CONTEXT)}>Detach</button>
              </li>
            ))}
          </ul>
        )}
      {offered.length > 0 && (
        <div className="filters">
          <div>
            <label htmlFor={`${headingId}-attach`}>Attach to a deployment of {adapter.baseModel}</label>
            <select id={`${headingId}-attach`} value={target} onChange={(event) => setTarget(event.target.value)}>
              <option value="">Choose a deployment</option>
              {offered.map((deployment) => <option key={deployment.id} value={deployment.id}>{deploymentLabel(deployment)}</option>)}
            </select>
          </div>
          <button type="button" disabled={busy || target === ''} aria-label={`Attach ${adapter.name}`}
            onClick={() => void attach({ adapterId: adapter.id, deploymentId: target }, ADAPTER_CONTEXT).then((result) => { if (result.data) setTarget(''); })}>Attach</button>
        </div>
      )}

      <h3>Residency</h3>
      <AdapterResidency rows={adapter.residency} label={`Residency of ${adapter.name}`} deploymentNames={names} />

      <div className="actions">
        <button type="button" disabled={busy} onClick={() => void setSharing({ id: adapter.id, shared: !adapter.sharedWithGuests }, ADAPTER_CONTEXT)}
          aria-label={adapter.sharedWithGuests ? `Stop sharing ${adapter.name}` : `Share with guests: ${adapter.name}`}>
          {adapter.sharedWithGuests ? 'Stop sharing' : 'Share with guests'}
        </button>
        <ConfirmButton label="Delete" accessibleName={`Delete ${adapter.name}`} disabled={busy}
          question="Delete this adapter and its weights? Requests naming it are refused from now on."
          onConfirm={() => void remove({ id: adapter.id }, ADAPTER_CONTEXT)} />
      </div>
      {actionError && <ErrorView error={actionError} title="The change was not made" />}
      <NewWeights adapter={adapter} deployments={deployments} />
    </article>
  );
}

/** New weights for an adapter: a new revision (requests in flight finish on the old one). */
function NewWeights({ adapter, deployments }: { adapter: Listed; deployments: Deployment[] }) {
  const [values, setValues] = useState<WeightsValues>(EMPTY_WEIGHTS);
  const [result, update] = useMutation(UPDATE_WEIGHTS);
  const [done, setDone] = useState<number | null>(null);
  const uploads = useWeightsUpload();
  const idPrefix = `weights-${adapter.id}`;
  const rankError = rankProblem(values);
  const buckets = deployments.map((deployment) => ({ id: deployment.id, label: deploymentLabel(deployment) }));
  const submit = async () => {
    if (rankError) return;
    setDone(null);
    const fileId = await uploadedFile(values, buckets, uploads);
    if (fileId === null) return;
    const answer = await update({ id: adapter.id, input: weightsInput(values, fileId) }, ADAPTER_CONTEXT);
    if (answer.data) {
      setDone(answer.data.updateAdapterWeights.revision);
      setValues(EMPTY_WEIGHTS);
    }
  };
  return (
    <details>
      <summary>Upload new weights (a new revision)</summary>
      <form aria-label={`New weights for ${adapter.name}`} onSubmit={(event) => { event.preventDefault(); void submit(); }}>
        <AdapterWeightsFields idPrefix={idPrefix} values={values} onChange={setValues} error={result.error} rankError={rankError} buckets={buckets} upload={uploads.state} />
        <p><button type="submit" disabled={result.fetching || uploads.state.progress !== null}>Save as a new revision</button></p>
        <UnplacedError error={result.error} params={WEIGHTS_PARAMS} title="The weights were not replaced" />
        <UnplacedError error={uploads.state.linkError} params={UPLOAD_PARAMS} title="The file was not uploaded" />
        {done !== null && <p role="status">Now at revision r{done}; requests in flight finish on the previous one.</p>}
      </form>
    </details>
  );
}

const REGISTER_PARAMS = ['name', 'baseModel', ...WEIGHTS_PARAMS];

/**
 * For a file source, the chosen file uploaded (a one-time link, then a PUT): its file id, or null
 * when the upload failed (its error is beside the file field). Other sources need no upload.
 */
async function uploadedFile(values: WeightsValues, buckets: ReadonlyArray<{ id: string }>, uploads: ReturnType<typeof useWeightsUpload>): Promise<string | undefined | null> {
  uploads.clear();
  if (values.source !== 'file') return undefined;
  if (!values.file) return null;
  return await uploads.upload(values.file, uploadDeployment(values, buckets));
}

function RegisterAdapter({ models, deployments }: { models: AdaptersQuery['catalog']; deployments: Deployment[] }) {
  const [name, setName] = useState('');
  const [baseModel, setBaseModel] = useState('');
  const [values, setValues] = useState<WeightsValues>(EMPTY_WEIGHTS);
  const [created, create] = useMutation(CREATE);
  const [registered, setRegistered] = useState<string | null>(null);
  const uploads = useWeightsUpload();
  const base = baseModel || models[0]?.id || '';
  const rankError = rankProblem(values);
  const baseError = fieldError(created.error, 'baseModel');
  const buckets = deployments.map((deployment) => ({ id: deployment.id, label: deploymentLabel(deployment) }));
  const submit = async () => {
    if (rankError) return;
    setRegistered(null);
    const fileId = await uploadedFile(values, buckets, uploads);
    if (fileId === null) return;
    const answer = await create({ input: { name: name.trim(), baseModel: base, ...weightsInput(values, fileId) } }, ADAPTER_CONTEXT);
    if (!answer.data) return;
    setRegistered(answer.data.createAdapter.name);
    setName('');
    setValues(EMPTY_WEIGHTS);
  };
  return (
    <section aria-labelledby="register-heading" className="card">
      <h2 id="register-heading">Register an adapter</h2>
      <form aria-label="Register an adapter" onSubmit={(event) => { event.preventDefault(); void submit(); }}>
        <Field id="adapter-name" label="Name" value={name} onChange={setName} required
          hint="what clients put in model: letters, digits, . _ - (up to 64)" error={fieldError(created.error, 'name')} />
        <div>
          <label htmlFor="adapter-base">Base model</label>
          <select id="adapter-base" value={base} onChange={(event) => setBaseModel(event.target.value)}
            aria-invalid={baseError ? true : undefined} aria-describedby={baseError ? 'adapter-base-error' : undefined}>
            {models.map((model) => <option key={model.id} value={model.id}>{model.name} ({model.id})</option>)}
          </select>
          {baseError && <p id="adapter-base-error" className="field-error">{baseError}</p>}
        </div>
        <AdapterWeightsFields idPrefix="register" values={values} onChange={setValues} error={created.error} rankError={rankError} buckets={buckets} upload={uploads.state} />
        <p><button type="submit" disabled={created.fetching || uploads.state.progress !== null}>Register</button></p>
        <UnplacedError error={created.error} params={REGISTER_PARAMS} title="The adapter was not registered" />
        <UnplacedError error={uploads.state.linkError} params={UPLOAD_PARAMS} title="The file was not uploaded" />
        {registered && <p role="status">Registered <code>{registered}</code>. Attach it to a deployment of its base model to serve it.</p>}
      </form>
    </section>
  );
}
