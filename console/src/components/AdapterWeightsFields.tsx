import { useEffect, useRef } from 'react';
import type { CombinedError } from 'urql';
import { Field } from './Field';
import { fieldError } from './states';
import type { UploadState } from './weights-upload';

/** Where an adapter's weights come from, as the page offers it. */
export type WeightsSource = 'huggingFace' | 'bucket' | 'file';

export interface WeightsValues {
  source: WeightsSource;
  huggingFaceRepo: string;
  /** The deployment whose bucket holds bucketKey, or whose Files API keeps an uploaded file. */
  deploymentId: string;
  bucketKey: string;
  /** A file chosen to upload (source `file`). */
  file: File | null;
  rank: string;
}

export const EMPTY_WEIGHTS: WeightsValues = { source: 'huggingFace', huggingFaceRepo: '', deploymentId: '', bucketKey: '', file: null, rank: '' };

/** The input's fields the API may name in an error about the weights (BAD_USER_INPUT `param`). */
export const WEIGHTS_PARAMS = ['huggingFaceRepo', 'bucketKey', 'deploymentId', 'rank', 'fileId', 'format', 'checksum'];
/** The upload link's fields an error may name (`createAdapterUploadLink`): shown beside the file chooser. */
export const UPLOAD_PARAMS = ['bytes', 'filename', 'deploymentId'];

/**
 * The weights part of `createAdapter` and `updateAdapterWeights`: exactly one source. A rank the
 * platform cannot read (a Hugging Face repo is fetched by the engine host, never by the
 * platform) must be given; for a bucket object it is read from the file and checked when given.
 */
export function weightsInput(values: WeightsValues, fileId?: string): { huggingFaceRepo?: string; bucketKey?: string; deploymentId?: string; fileId?: string; rank?: number } {
  const rank = values.rank.trim() === '' ? undefined : Number(values.rank.trim());
  if (values.source === 'file') return { fileId, rank };
  return values.source === 'huggingFace'
    ? { huggingFaceRepo: values.huggingFaceRepo.trim(), rank }
    : { bucketKey: values.bucketKey.trim(), deploymentId: values.deploymentId || undefined, rank };
}

/** The deployment an upload goes to: the one chosen, else the first offered. */
export function uploadDeployment(values: WeightsValues, buckets: ReadonlyArray<{ id: string }>): string {
  return values.deploymentId || buckets[0]?.id || '';
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
export function AdapterWeightsFields({ idPrefix, values, onChange, error, buckets, rankError, upload }: {
  idPrefix: string; values: WeightsValues; onChange: (values: WeightsValues) => void; error: CombinedError | undefined; rankError?: string;
  buckets: ReadonlyArray<{ id: string; label: string }>; upload: UploadState;
}) {
  const set = (patch: Partial<WeightsValues>) => onChange({ ...values, ...patch });
  const bucketError = fieldError(error, 'deploymentId');
  const fileError = upload.error ?? fieldError(upload.linkError, 'bytes') ?? fieldError(upload.linkError, 'filename') ?? fieldError(error, 'fileId');
  const filesDeploymentError = fieldError(upload.linkError, 'deploymentId');
  const fileInput = useRef<HTMLInputElement>(null);
  // The form was reset (registered, or a new revision saved): the chooser shows no file either.
  useEffect(() => {
    if (!values.file && fileInput.current) fileInput.current.value = '';
  }, [values.file]);
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
        <label style={{ display: 'inline', fontWeight: 400 }}>
          <input type="radio" name={`${idPrefix}-source`} checked={values.source === 'file'} onChange={() => set({ source: 'file' })} /> A file from this computer
        </label>
      </fieldset>
      {values.source === 'file' ? (
        <>
          <div>
            <label htmlFor={`${idPrefix}-file`}>Weights file</label>
            <input id={`${idPrefix}-file`} ref={fileInput} type="file" accept=".gguf,.tar,.safetensors,application/octet-stream" required
              onChange={(event) => set({ file: event.target.files?.[0] ?? null })}
              aria-invalid={fileError ? true : undefined} aria-describedby={`${idPrefix}-file-hint${fileError ? ` ${idPrefix}-file-error` : ''}`} />
            <p id={`${idPrefix}-file-hint`} className="muted">a GGUF, a PEFT tar or an adapter_model.safetensors; uploaded to the Files API (purpose user_data), then registered</p>
            {upload.progress !== null && (
              <p role="status"><progress value={upload.progress} max={1} aria-label="Upload progress" /> Uploading… {Math.round(upload.progress * 100)}%</p>
            )}
            {fileError && <p id={`${idPrefix}-file-error`} className="field-error">{fileError}</p>}
          </div>
          <div>
            <label htmlFor={`${idPrefix}-file-deployment`}>Deployment whose Files API keeps it</label>
            <select id={`${idPrefix}-file-deployment`} value={uploadDeployment(values, buckets)} onChange={(event) => set({ deploymentId: event.target.value })}
              aria-invalid={filesDeploymentError ? true : undefined} aria-describedby={filesDeploymentError ? `${idPrefix}-file-deployment-error` : undefined}>
              {buckets.map((bucket) => <option key={bucket.id} value={bucket.id}>{bucket.label}</option>)}
            </select>
            {filesDeploymentError && <p id={`${idPrefix}-file-deployment-error`} className="field-error">{filesDeploymentError}</p>}
          </div>
        </>
      ) : values.source === 'huggingFace' ? (
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
