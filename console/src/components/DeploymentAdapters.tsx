import { useEffect, useState } from 'react';
import { Link } from 'react-router-dom';
import { useMutation, useQuery, useSubscription } from 'urql';
import { graphql } from '../gql';
import { ADAPTER_CONTEXT, DETACH_ADAPTER } from '../graphql/adapters';
import { useRefetchWhenIdle } from '../graphql/use-refetch-when-idle';
import { AdapterResidency } from './AdapterResidency';
import { Field, UnplacedError } from './Field';
import { Empty, ErrorView, fieldError, Loading } from './states';

const ATTACHED = graphql(`
  query DeploymentAdapters($deploymentId: ID!) { adapters(deploymentId: $deploymentId) { ...AdapterParts } }
`);

const ADAPTER_CHANGES = graphql(`
  subscription DeploymentAdapterChanges { adapterUpdated { id } }
`);

const SET_LORA = graphql(`
  mutation SetLoraSettings($id: ID!, $maxLoras: Int, $maxCpuLoras: Int, $maxLoraRank: Int) {
    updateDeployment(id: $id, input: { maxLoras: $maxLoras, maxCpuLoras: $maxCpuLoras, maxLoraRank: $maxLoraRank }) { id maxLoras maxCpuLoras maxLoraRank updatedAt }
  }
`);

export interface LoraSettings { maxLoras: number; maxCpuLoras: number; maxLoraRank: number }

const LORA_PARAMS = ['maxLoras', 'maxCpuLoras', 'maxLoraRank'];
/** Residency comes from heartbeats, which fire no event: re-read it this often. */
const REREAD_MS = 5_000;

/**
 * A text deployment's LoRA side (docs/adapters.md): its adapter capacity (editable: engines
 * read it at start, so replicas placed from then on get it), the adapters attached to it with
 * a detach button, and which of its replicas hold which adapter.
 */
export function DeploymentAdapters({ deploymentId, settings, editable }: { deploymentId: string; settings: LoraSettings; editable: boolean }) {
  const [{ data, fetching, stale, error }, refetch] = useQuery({ query: ATTACHED, variables: { deploymentId }, context: ADAPTER_CONTEXT });
  const reread = useRefetchWhenIdle(fetching || stale, refetch);
  const [updates] = useSubscription({ query: ADAPTER_CHANGES }, (_previous: unknown, event) => {
    reread();
    return event;
  });
  useEffect(() => {
    const timer = setInterval(reread, REREAD_MS);
    return () => clearInterval(timer);
  }, [reread]);
  const [detached, detach] = useMutation(DETACH_ADAPTER);
  const adapters = data?.adapters ?? [];
  const residency = adapters.flatMap((adapter) => adapter.residency
    .filter((row) => row.deploymentId === deploymentId)
    .map((row) => ({ ...row, adapter: adapter.name })));

  return (
    <>
      <LoraSettingsForm deploymentId={deploymentId} settings={settings} editable={editable} />
      <h3>Attached adapters</h3>
      {error && <ErrorView error={error} title="The adapters could not be read" />}
      {updates.error && <ErrorView error={updates.error} title="Live updates stopped; reload the page to resume them" />}
      {!data && fetching && <Loading what="adapters" />}
      {data && adapters.length === 0 && <Empty>No adapter is attached. <Link to="/adapters">Register and attach one on the Adapters page.</Link></Empty>}
      {adapters.length > 0 && (
        <ul aria-label="Attached adapters">
          {adapters.map((adapter) => (
            <li key={adapter.id} className="actions">
              <code>{adapter.name}</code> <span className="muted">rank {adapter.rank}, {adapter.format}, r{adapter.revision}</span>
              <button type="button" disabled={detached.fetching} aria-label={`Detach ${adapter.name}`}
                onClick={() => void detach({ adapterId: adapter.id, deploymentId }, ADAPTER_CONTEXT)}>Detach</button>
            </li>
          ))}
        </ul>
      )}
      {detached.error && <ErrorView error={detached.error} title="The adapter was not detached" />}
      {adapters.length > 0 && (
        <>
          <h3>Adapters held by its replicas</h3>
          <AdapterResidency rows={residency} label="Adapter residency by replica" showAdapter />
        </>
      )}
    </>
  );
}

function LoraSettingsForm({ deploymentId, settings, editable }: { deploymentId: string; settings: LoraSettings; editable: boolean }) {
  const [values, setValues] = useState({ maxLoras: String(settings.maxLoras), maxCpuLoras: String(settings.maxCpuLoras), maxLoraRank: String(settings.maxLoraRank) });
  const [saved, save] = useMutation(SET_LORA);
  const [done, setDone] = useState(false);
  // The deployment changed elsewhere (another tab, the API): show its settings.
  useEffect(() => {
    setValues({ maxLoras: String(settings.maxLoras), maxCpuLoras: String(settings.maxCpuLoras), maxLoraRank: String(settings.maxLoraRank) });
  }, [settings.maxLoras, settings.maxCpuLoras, settings.maxLoraRank]);
  const number = (text: string): number => (/^[0-9]{1,6}$/.test(text.trim()) ? Number(text.trim()) : Number.NaN);
  const problems = Object.fromEntries(Object.entries(values).map(([field, text]) => [field, Number.isNaN(number(text)) ? `${field} must be a whole number` : undefined]));
  const submit = () => {
    setDone(false);
    if (Object.values(problems).some(Boolean)) return;
    void save({ id: deploymentId, maxLoras: number(values.maxLoras), maxCpuLoras: number(values.maxCpuLoras), maxLoraRank: number(values.maxLoraRank) }, { additionalTypenames: ['Deployment'] })
      .then((answer) => setDone(Boolean(answer.data)));
  };
  const set = (field: keyof typeof values) => (value: string) => setValues((current) => ({ ...current, [field]: value }));
  if (!editable) {
    return <p>{settings.maxLoras} adapter slots per replica, {settings.maxCpuLoras} more in host memory, rank up to {settings.maxLoraRank}.</p>;
  }
  return (
    <form aria-label="LoRA settings" onSubmit={(event) => { event.preventDefault(); submit(); }}>
      <div className="filters">
        <Field id="lora-max-loras" label="Adapter slots per replica" numeric value={values.maxLoras} onChange={set('maxLoras')}
          hint="maxLoras; 0 serves none" error={problems.maxLoras ?? fieldError(saved.error, 'maxLoras')} />
        <Field id="lora-max-cpu-loras" label="Kept in host memory" numeric value={values.maxCpuLoras} onChange={set('maxCpuLoras')}
          hint="maxCpuLoras; beyond the slots, 0 to 4096" error={problems.maxCpuLoras ?? fieldError(saved.error, 'maxCpuLoras')} />
        <Field id="lora-max-rank" label="Largest rank" numeric value={values.maxLoraRank} onChange={set('maxLoraRank')}
          hint="maxLoraRank: 8 to 256, a power of two" error={problems.maxLoraRank ?? fieldError(saved.error, 'maxLoraRank')} />
      </div>
      <p><button type="submit" disabled={saved.fetching}>Save LoRA settings</button> <span className="muted">Engines read these at start: replicas placed from now on get them.</span></p>
      <UnplacedError error={saved.error} params={LORA_PARAMS} title="The settings were not saved" />
      {done && <p role="status">Saved.</p>}
    </form>
  );
}
