import type { CombinedError } from 'urql';
import { Field } from './Field';
import { fieldError } from './states';

/** Where an adapter's weights come from, as the page offers it. */
export type WeightsSource = 'huggingFace' | 'bucket';

export interface WeightsValues {
  source: WeightsSource;
  huggingFaceRepo: string;
  deploymentId: string;
  bucketKey: string;
  rank: string;
}

export const EMPTY_WEIGHTS: WeightsValues = { source: 'huggingFace', huggingFaceRepo: '', deploymentId: '', bucketKey: '', rank: '' };

/** The input's fields the API may name in an error about the weights (BAD_USER_INPUT `param`). */
export const WEIGHTS_PARAMS = ['huggingFaceRepo', 'bucketKey', 'deploymentId', 'rank', 'fileId', 'format', 'checksum'];

/**
 * The weights part of `createAdapter` and `updateAdapterWeights`: exactly one source. A rank the
 * platform cannot read (a Hugging Face repo is fetched by the engine host, never by the
 * platform) must be given; for a bucket object it is read from the file and checked when given.
 */
export function weightsInput(values: WeightsValues): { huggingFaceRepo?: string; bucketKey?: string; deploymentId?: string; rank?: number } {
  const rank = values.rank.trim() === '' ? undefined : Number(values.rank.trim());
  return values.source === 'huggingFace'
    ? { huggingFaceRepo: values.huggingFaceRepo.trim(), rank }
    : { bucketKey: values.bucketKey.trim(), deploymentId: values.deploymentId || undefined, rank };
}

/** A rank that is not a whole number never reaches the API (GraphQL would refuse the variable without naming the field). */
export function rankProblem(values: WeightsValues): string | undefined {
  const rank = values.rank.trim();
  return rank === '' || /^[0-9]{1,6}$/.test(rank) ? undefined : 'rank must be a whole number, such as 8, 16 or 64';
}

/**
 * The source chooser and its fields, each with the API's own error beside it. `buckets`: the
 * workspace's deployments that may hold the object (any deployment with a bucket; the API says
 * which have none).
 */
export function AdapterWeightsFields({ idPrefix, values, onChange, error, buckets, rankError }: {
  idPrefix: string; values: WeightsValues; onChange: (values: WeightsValues) => void; error: CombinedError | undefined; rankError?: string;
  buckets: ReadonlyArray<{ id: string; label: string }>;
}) {
  const set = (patch: Partial<WeightsValues>) => onChange({ ...values, ...patch });
  const bucketError = fieldError(error, 'deploymentId');
  return (
    <>
      <fieldset className="filters" style={{ border: 'none', padding: 0, margin: '8px 0' }}>
        <legend style={{ fontWeight: 600 }}>Weights from</legend>
        <label style={{ display: 'inline', fontWeight: 400 }}>
          <input type="radio" name={`${idPrefix}-source`} checked={values.source === 'huggingFace'} onChange={() => set({ source: 'huggingFace' })} /> A Hugging Face repo
        </label>
        <label style={{ display: 'inline', fontWeight: 400 }}>
          <input type="radio" name={`${idPrefix}-source`} checked={values.source === 'bucket'} onChange={() => set({ source: 'bucket' })} /> A deployment&apos;s bucket
        </label>
      </fieldset>
      {values.source === 'huggingFace' ? (
        <Field id={`${idPrefix}-hf`} label="Hugging Face repo" value={values.huggingFaceRepo} onChange={(value) => set({ huggingFaceRepo: value })}
          hint="org/name or org/name@revision; the engine host fetches it" error={fieldError(error, 'huggingFaceRepo') ?? fieldError(error, 'fileId')} required />
      ) : (
        <>
          <div>
            <label htmlFor={`${idPrefix}-bucket-deployment`}>Deployment whose bucket holds it</label>
            <select id={`${idPrefix}-bucket-deployment`} value={values.deploymentId} onChange={(event) => set({ deploymentId: event.target.value })}
              aria-invalid={bucketError ? true : undefined} aria-describedby={bucketError ? `${idPrefix}-bucket-deployment-error` : undefined}>
              <option value="">Choose a deployment</option>
              {buckets.map((bucket) => <option key={bucket.id} value={bucket.id}>{bucket.label}</option>)}
            </select>
            {bucketError && <p id={`${idPrefix}-bucket-deployment-error`} className="field-error">{bucketError}</p>}
          </div>
          <Field id={`${idPrefix}-bucket-key`} label="Object key" value={values.bucketKey} onChange={(value) => set({ bucketKey: value })}
            hint="a GGUF, a PEFT tar or an adapter_model.safetensors" error={fieldError(error, 'bucketKey')} required />
        </>
      )}
      <Field id={`${idPrefix}-rank`} label="Rank" numeric value={values.rank} onChange={(value) => set({ rank: value })}
        hint={values.source === 'huggingFace' ? 'required: the platform does not read a repo' : 'read from the weights; checked when given'}
        error={rankError ?? fieldError(error, 'rank')} />
      {(['format', 'checksum'] as const).map((param) => fieldError(error, param) && <p key={param} className="field-error">{fieldError(error, param)}</p>)}
    </>
  );
}
