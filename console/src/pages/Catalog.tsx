import { useEffect, useRef, useState } from 'react';
import { useNavigate } from 'react-router-dom';
import { CombinedError, useMutation, useQuery } from 'urql';
import { graphql } from '../gql';
import { TableScroll } from '../components/TableScroll';
import type { CatalogPageQuery, GpuOffersQuery } from '../gql/graphql';
import { Empty, ErrorView, fieldError, Loading } from '../components/states';
import { formatUsd } from '../components/format';
import { AutoscalingFields, AUTOSCALING_PARAMS, draftOf, inputOf, sloTargetsOf } from '../components/AutoscalingFields';

const CATALOG = graphql(`
  query CatalogPage {
    catalog { id name modality task engine official gpuMemoryGb sizes targetConcurrency }
    capacityProviders
    sharedModels { modelId inputPricePerMillion outputPricePerMillion }
  }
`);

const GPU_OFFERS = graphql(`
  query GpuOffers($provider: String!) {
    gpuOffers(provider: $provider) { id provider gpuName gpuMemoryGb region pricePerHour available }
  }
`);

const STORAGE_CREDENTIALS = graphql(`
  query StorageCredentialChoices {
    storageCredentials { id name bucket status }
  }
`);

const CREATE_DEPLOYMENT = graphql(`
  mutation CreateDeployment($input: CreateDeploymentInput!) {
    createDeployment(input: $input) { deployment { id status } }
  }
`);

type CatalogModel = CatalogPageQuery['catalog'][number];
type SharedPrices = CatalogPageQuery['sharedModels'][number];
type Offer = GpuOffersQuery['gpuOffers'][number];

/**
 * Providers the platform launches replicas on, shown when this server has them configured
 * (`capacityProviders`); external deployments (agents joining with a token) are left to the API.
 */
const PROVIDERS = [
  ['local', 'Local (this host)'],
  ['market', 'GPU market'],
  ['static', 'Operator hosts'],
  ['kubernetes', 'Kubernetes cluster'],
] as const;

/** Fields whose API errors (`extensions.param`) are shown beside them rather than in the page's alert. */
const FORM_FIELDS = ['priceCapPerHour', 'minReplicas', 'maxReplicas', 'autoscale', 'storageCredentialId', 'shareIdleCapacity', 'provider', ...AUTOSCALING_PARAMS];

/** Catalog models, each with what its capacity costs on the chosen provider; choosing one opens the create form. */
export function Catalog() {
  const [picked, setProvider] = useState<string>('local');
  const [chosen, setChosen] = useState<string | null>(null);
  const [{ data, fetching, error }] = useQuery({ query: CATALOG });
  const choices = data ? PROVIDERS.filter(([value]) => data.capacityProviders.includes(value)) : [];
  // The first configured provider until the user picks one this server has.
  const provider = choices.some(([value]) => value === picked) ? picked : choices[0]?.[0] ?? picked;
  const [offers] = useQuery({ query: GPU_OFFERS, variables: { provider }, pause: choices.length === 0 });

  const model = data?.catalog.find((item) => item.id === chosen) ?? null;
  const sharedPricesOf = (id: string) => data?.sharedModels.find((item) => item.modelId === id) ?? null;

  return (
    <section>
      <header className="page-header"><h1>Catalog</h1></header>
      <p className="muted">Choose a model to deploy it at its own OpenAI-compatible endpoint, billed per replica-hour of GPU time.</p>
      <label htmlFor="provider">Capacity provider</label>
      <select id="provider" value={provider} onChange={(event) => setProvider(event.target.value)}>
        {choices.map(([value, label]) => <option key={value} value={value}>{label}</option>)}
      </select>
      {offers.error && <ErrorView error={offers.error} title="GPU offers could not be read" />}
      {error && <ErrorView error={error} />}
      {!data && fetching && <Loading what="the catalog" />}
      {data && data.catalog.length === 0 && <Empty>The catalog has no models yet; an operator adds them with registerCatalogModel.</Empty>}
      {data && data.catalog.length > 0 && (
        <TableScroll><table>
          <caption className="muted" style={{ textAlign: 'left', padding: '8px 0' }}>Models deployments can be created from</caption>
          <thead>
            <tr><th scope="col">Model</th><th scope="col">Modality</th><th scope="col">GPU memory</th><th scope="col">Per replica-hour</th><th scope="col">Shared, per 1M tokens</th><th scope="col"><span className="visually-hidden" style={HIDDEN}>Action</span></th></tr>
          </thead>
          <tbody>
            {data.catalog.map((item) => {
              const shared = sharedPricesOf(item.id);
              return (
                <tr key={item.id}>
                  <td><strong>{item.name}</strong><br /><code>{item.id}</code>{item.official ? '' : <span className="muted"> (community)</span>}</td>
                  <td>{item.modality} <span className="muted">({item.task})</span></td>
                  <td>{item.gpuMemoryGb} GB</td>
                  <td>{offers.data ? fromPrice(offers.data.gpuOffers, item) : offers.fetching ? '…' : '—'}</td>
                  <td>{shared ? `$${shared.inputPricePerMillion} in / $${shared.outputPricePerMillion} out` : <span className="muted">not shareable</span>}</td>
                  <td>
                    <button type="button" aria-label={`Deploy ${item.name}`} aria-pressed={chosen === item.id} onClick={() => setChosen(item.id)}>Deploy</button>
                  </td>
                </tr>
              );
            })}
          </tbody>
        </table></TableScroll>
      )}
      {model && (
        <CreateDeploymentForm
          key={`${model.id}:${provider}`}
          model={model}
          provider={provider}
          offers={offers.data?.gpuOffers ?? []}
          sharedPrices={sharedPricesOf(model.id)}
          onCancel={() => setChosen(null)}
        />
      )}
    </section>
  );
}

const HIDDEN: React.CSSProperties = { position: 'absolute', width: 1, height: 1, overflow: 'hidden', clip: 'rect(0 0 0 0)', whiteSpace: 'nowrap' };

function fits(offer: Offer, model: CatalogModel): boolean {
  return offer.gpuMemoryGb >= model.gpuMemoryGb && (offer.available === null || offer.available > 0);
}

function fromPrice(offers: readonly Offer[], model: CatalogModel): string {
  const fitting = offers.filter((offer) => fits(offer, model));
  if (fitting.length === 0) return 'no offer fits now';
  return `from ${formatUsd(Math.min(...fitting.map((offer) => offer.pricePerHour)))}`;
}

/**
 * What `count` replicas cost per hour when placement fills them as the server does: the cheapest
 * admitted offer first, moving on when its machines run out. null when the admitted offers hold fewer.
 */
function hourlyCost(admitted: readonly Offer[], count: number): number | null {
  let left = count;
  let total = 0;
  for (const offer of [...admitted].sort((a, b) => a.pricePerHour - b.pricePerHour)) {
    const take = offer.available === null ? left : Math.min(left, offer.available);
    total += take * offer.pricePerHour;
    left -= take;
    if (left === 0) return total;
  }
  return left === 0 ? total : null;
}

function CreateDeploymentForm({ model, provider, offers, sharedPrices, onCancel }: {
  model: CatalogModel; provider: string; offers: readonly Offer[]; sharedPrices: SharedPrices | null; onCancel: () => void;
}) {
  const navigate = useNavigate();
  const heading = useRef<HTMLHeadingElement>(null);
  const fitting = offers.filter((offer) => fits(offer, model));
  const cheapest = fitting.length > 0 ? Math.min(...fitting.map((offer) => offer.pricePerHour)) : 0;
  const [priceCap, setPriceCap] = useState(String(cheapest > 0 ? cheapest : 1));
  const [minReplicas, setMinReplicas] = useState('1');
  const [maxReplicas, setMaxReplicas] = useState('1');
  const [autoscale, setAutoscale] = useState(false);
  const [storage, setStorage] = useState('managed');
  const [share, setShare] = useState(false);
  const [scaling, setScaling] = useState(() => draftOf());
  const targets = sloTargetsOf(model);
  const [created, create] = useMutation(CREATE_DEPLOYMENT);
  const media = model.modality === 'image' || model.modality === 'video';
  const [credentials] = useQuery({ query: STORAGE_CREDENTIALS, pause: !media });
  const verified = credentials.data?.storageCredentials.filter((credential) => credential.status === 'verified') ?? [];

  useEffect(() => heading.current?.focus(), []);

  const cap = Number(priceCap);
  const admitted = fitting.filter((offer) => Number.isFinite(cap) && offer.pricePerHour <= cap);
  const atMin = hourlyCost(admitted, Number(minReplicas) || 0);
  const atMax = hourlyCost(admitted, Number(maxReplicas) || 0);

  const submit = async (event: React.FormEvent) => {
    event.preventDefault();
    const result = await create({
      input: {
        modelId: model.id, provider,
        // Numbers go to the API as typed (an empty field as NaN → null): its own validation words the problem.
        priceCapPerHour: priceCap.trim() === '' ? Number.NaN : Number(priceCap),
        minReplicas: minReplicas.trim() === '' ? Number.NaN : Number(minReplicas),
        maxReplicas: maxReplicas.trim() === '' ? Number.NaN : Number(maxReplicas),
        autoscale,
        ...inputOf(scaling, targets),
        ...(media && storage !== 'managed' ? { storageCredentialId: Number(storage) } : {}),
        ...(sharedPrices ? { shareIdleCapacity: share } : {}),
      },
    }, { additionalTypenames: ['Deployment'] });
    if (result.data) navigate(`/deployments/${result.data.createDeployment.deployment.id}`);
  };

  const error = created.error;
  const others = error?.graphQLErrors.filter((item) => !FORM_FIELDS.includes(String(item.extensions?.param ?? ''))) ?? [];
  const otherError = error && (others.length > 0 || error.networkError)
    ? new CombinedError({ graphQLErrors: others, networkError: error.networkError, response: error.response })
    : null;

  const field = (param: string) => {
    const message = fieldError(error, param);
    return {
      'aria-invalid': message ? true : undefined,
      'aria-describedby': message ? `${param}-error` : `${param}-help`,
      message: message ? <p id={`${param}-error`} className="field-error">{message}</p> : null,
    };
  };
  const priceField = field('priceCapPerHour');
  const minField = field('minReplicas');
  const maxField = field('maxReplicas');
  const storageField = field('storageCredentialId');
  const shareField = field('shareIdleCapacity');
  const providerField = field('provider');

  return (
    <form onSubmit={submit} noValidate aria-labelledby="create-heading" style={{ marginTop: 24, background: '#fff', padding: '8px 20px 20px', borderRadius: 8, border: '1px solid #dde1e6' }}>
      <h2 id="create-heading" ref={heading} tabIndex={-1}>Create a deployment of {model.name}</h2>
      <p className="muted">
        <code>{model.id}</code>: {model.modality}, {model.task}, needs {model.gpuMemoryGb} GB of GPU memory; runs on the {PROVIDERS.find(([value]) => value === provider)?.[1] ?? provider} provider.
      </p>
      {providerField.message}

      <label htmlFor="priceCapPerHour">Price cap per replica-hour (USD)</label>
      <input id="priceCapPerHour" type="number" step="any" inputMode="decimal" value={priceCap} onChange={(event) => setPriceCap(event.target.value)}
        aria-invalid={priceField['aria-invalid']} aria-describedby={priceField['aria-describedby']} />
      {priceField.message}
      <div id="priceCapPerHour-help">
        {fitting.length === 0
          ? <p className="muted">No offer of this provider has {model.gpuMemoryGb} GB of GPU memory now; the deployment will wait for capacity.</p>
          : (
            <>
              <p>
                {admitted.length === 0
                  ? `No current offer is at or under this cap (the cheapest that fits is ${formatUsd(cheapest)}/h); replicas wait for a cheaper offer.`
                  : `This cap admits ${admitted.length} of ${fitting.length} offers that fit.`}
                {' '}Hourly cost: {atMin === null ? 'not reachable' : formatUsd(atMin)} at {minReplicas || '?'} (min) and {atMax === null ? 'not reachable with current offers' : formatUsd(atMax)} at {maxReplicas || '?'} (max) replicas.
              </p>
              <TableScroll><table aria-label="GPU offers that fit this model">
                <thead><tr><th scope="col">GPU</th><th scope="col">Memory</th><th scope="col">Region</th><th scope="col">Per hour</th><th scope="col">Machines</th><th scope="col">Under the cap</th></tr></thead>
                <tbody>
                  {fitting.map((offer) => (
                    <tr key={offer.id}>
                      <td>{offer.gpuName}</td><td>{offer.gpuMemoryGb} GB</td><td>{offer.region}</td><td>{formatUsd(offer.pricePerHour)}</td>
                      <td>{offer.available ?? 'unlimited'}</td><td>{admitted.includes(offer) ? 'Admitted' : 'Above the cap'}</td>
                    </tr>
                  ))}
                </tbody>
              </table></TableScroll>
            </>
          )}
      </div>

      <div style={{ display: 'flex', gap: 24 }}>
        <div>
          <label htmlFor="minReplicas">Minimum replicas</label>
          <input id="minReplicas" type="number" step={1} value={minReplicas} onChange={(event) => setMinReplicas(event.target.value)}
            aria-invalid={minField['aria-invalid']} aria-describedby={minField['aria-describedby']} />
          {minField.message}
        </div>
        <div>
          <label htmlFor="maxReplicas">Maximum replicas</label>
          <input id="maxReplicas" type="number" step={1} value={maxReplicas} onChange={(event) => setMaxReplicas(event.target.value)}
            aria-invalid={maxField['aria-invalid']} aria-describedby={maxField['aria-describedby']} />
          {maxField.message}
        </div>
      </div>
      <p id="minReplicas-help" className="muted">At least 1.</p>
      <p id="maxReplicas-help" className="muted">Autoscale moves between minimum and maximum by load.</p>

      <p>
        <input id="autoscale" type="checkbox" checked={autoscale} onChange={(event) => setAutoscale(event.target.checked)} aria-describedby="autoscale-help" />{' '}
        <label htmlFor="autoscale" style={{ display: 'inline' }}>Autoscale</label>
      </p>
      <p id="autoscale-help" className="muted">{autoscale ? 'Scales within the range by load.' : 'Stays pinned at the minimum.'}</p>

      <fieldset style={{ border: '1px solid #dde1e6', borderRadius: 8, margin: '12px 0' }}>
        <legend>Autoscaling policy and SLO</legend>
        <AutoscalingFields draft={scaling} onChange={setScaling} targets={targets} error={error} />
      </fieldset>

      {media && (
        <>
          <label htmlFor="storageCredentialId">Output storage</label>
          <select id="storageCredentialId" value={storage} onChange={(event) => setStorage(event.target.value)}
            aria-invalid={storageField['aria-invalid']} aria-describedby={storageField['aria-describedby']}>
            <option value="managed">Managed</option>
            {verified.map((credential) => <option key={credential.id} value={String(credential.id)}>{credential.name} ({credential.bucket})</option>)}
          </select>
          {storageField.message}
          <p id="storageCredentialId-help" className="muted">
            {credentials.fetching ? 'Loading storage credentials…' : verified.length === 0 ? 'No verified storage credential yet: outputs go to Managed storage.' : 'Only verified storage credentials receive outputs.'}
          </p>
          {credentials.error && <ErrorView error={credentials.error} title="Storage credentials could not be read" />}
        </>
      )}

      {sharedPrices && (
        <>
          <p>
            <input id="shareIdleCapacity" type="checkbox" checked={share} onChange={(event) => setShare(event.target.checked)}
              aria-invalid={shareField['aria-invalid']} aria-describedby={shareField['aria-describedby']} />{' '}
            <label htmlFor="shareIdleCapacity" style={{ display: 'inline' }}>Share idle capacity</label>
          </p>
          {shareField.message}
          <p id="shareIdleCapacity-help" className="muted">
            Guests of shared serving use idle slots at ${sharedPrices.inputPricePerMillion} (input) and ${sharedPrices.outputPricePerMillion} (output) per 1M tokens; you are credited all of it. Your own requests always come first.
          </p>
        </>
      )}

      {otherError && <ErrorView error={otherError} title="The deployment was not created" />}
      <p style={{ display: 'flex', gap: 8 }}>
        <button type="submit" disabled={created.fetching}>{created.fetching ? 'Creating…' : 'Create deployment'}</button>
        <button type="button" onClick={onCancel}>Cancel</button>
      </p>
    </form>
  );
}
