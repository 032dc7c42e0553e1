import type { CombinedError } from 'urql';
import type { ScalingPolicy } from '../gql/graphql';
import { Field } from './Field';
import { fieldError } from './states';

/** The SLO targets of the API (`slo.<target>`), each a 95th percentile in ms. */
export type SloTarget = 'ttftP95Ms' | 'tpotP95Ms' | 'queueWaitP95Ms';
export type SloValues = { readonly [target in SloTarget]?: number | null };

const TARGET_LABELS: Record<SloTarget, string> = {
  ttftP95Ms: 'Time to first token, p95 (ms)',
  tpotP95Ms: 'Time per output token, p95 (ms)',
  queueWaitP95Ms: 'Queue wait before a job starts, p95 (ms)',
};
const TARGET_WORDS: Record<SloTarget, string> = { ttftP95Ms: 'TTFT p95', tpotP95Ms: 'time per output token p95', queueWaitP95Ms: 'queue wait p95' };

/** The params whose API errors these fields show beside themselves (`extensions.param`). */
export const AUTOSCALING_PARAMS = ['scalingPolicy', 'slo', 'slo.ttftP95Ms', 'slo.tpotP95Ms', 'slo.queueWaitP95Ms', 'scaleToZeroAfterSeconds', 'coldStartQueueLimit'];

/**
 * The targets a model's requests are measured by, as the server has them
 * (docs/scaling-settings.md): streamed text has a first token and tokens after it, image and
 * video jobs wait in a queue, embeddings answer in one piece and state none.
 */
export function sloTargetsOf(model: { modality: string; task: string }): SloTarget[] {
  if (model.modality !== 'text') return ['queueWaitP95Ms'];
  return model.task === 'embedding' ? [] : ['ttftP95Ms', 'tpotP95Ms'];
}

/** "TTFT p95 ≤ 800 ms, time per output token p95 ≤ 50 ms", or null when none is stated. */
export function sloWords(slo: SloValues | null | undefined): string | null {
  const stated = (Object.keys(TARGET_WORDS) as SloTarget[]).filter((target) => slo?.[target] != null);
  return stated.length === 0 ? null : stated.map((target) => `${TARGET_WORDS[target]} ≤ ${slo![target]!.toLocaleString('en-US')} ms`).join(', ');
}

/** The form's values as typed: numbers stay text until sent, so the API's own validation words a problem. */
export interface AutoscalingDraft {
  policy: ScalingPolicy;
  slo: Record<SloTarget, string>;
  scaleToZeroAfterSeconds: string;
  coldStartQueueLimit: string;
}

export function draftOf(settings?: {
  scalingPolicy: ScalingPolicy; slo?: SloValues | null; scaleToZeroAfterSeconds?: number | null; coldStartQueueLimit: number;
}): AutoscalingDraft {
  const text = (value: number | null | undefined) => (value === null || value === undefined ? '' : String(value));
  return {
    policy: settings?.scalingPolicy ?? 'CONCURRENCY',
    slo: { ttftP95Ms: text(settings?.slo?.ttftP95Ms), tpotP95Ms: text(settings?.slo?.tpotP95Ms), queueWaitP95Ms: text(settings?.slo?.queueWaitP95Ms) },
    scaleToZeroAfterSeconds: text(settings?.scaleToZeroAfterSeconds),
    coldStartQueueLimit: text(settings?.coldStartQueueLimit ?? 100),
  };
}

/**
 * The draft as createDeployment / updateDeployment take it: the whole SLO (an empty target is not
 * stated; none stated clears it), scale to zero null when empty (never), and numbers as typed.
 */
export function inputOf(draft: AutoscalingDraft, targets: readonly SloTarget[]) {
  const number = (text: string) => (text.trim() === '' ? null : Number(text));
  const slo = Object.fromEntries(targets.filter((target) => draft.slo[target].trim() !== '').map((target) => [target, number(draft.slo[target])]));
  return {
    scalingPolicy: draft.policy,
    slo: Object.keys(slo).length === 0 ? null : slo,
    scaleToZeroAfterSeconds: number(draft.scaleToZeroAfterSeconds),
    // Empty keeps the current limit (the API's null), 100 on a new deployment.
    coldStartQueueLimit: number(draft.coldStartQueueLimit),
  };
}

/** Policy, the SLO targets the model has, scale to zero and the cold-start queue, each with its own API error beside it. */
export function AutoscalingFields({ draft, onChange, targets, error }: {
  draft: AutoscalingDraft; onChange: (draft: AutoscalingDraft) => void; targets: readonly SloTarget[]; error: CombinedError | undefined;
}) {
  const policyError = fieldError(error, 'scalingPolicy');
  const sloError = fieldError(error, 'slo');
  return (
    <div style={{ display: 'grid', gap: 8 }}>
      <div>
        <label htmlFor="scalingPolicy">Scaling policy</label>
        <select id="scalingPolicy" value={draft.policy} onChange={(event) => onChange({ ...draft, policy: event.target.value as ScalingPolicy })}
          aria-invalid={policyError ? true : undefined} aria-describedby={policyError ? 'scalingPolicy-error' : 'scalingPolicy-hint'}>
          <option value="CONCURRENCY">Concurrency: in-flight and queued requests per replica</option>
          {targets.length > 0 && <option value="SLO">SLO: as many replicas as the SLO needs, from a forecast of arrivals</option>}
        </select>
        <span id="scalingPolicy-hint" className="muted"> {targets.length === 0 ? 'This model states no SLO, so it scales by concurrency.' : 'The SLO policy needs the first target below.'}</span>
        {policyError && <p id="scalingPolicy-error" className="field-error">{policyError}</p>}
      </div>
      {targets.map((target) => (
        <Field key={target} id={`slo-${target}`} label={TARGET_LABELS[target]} numeric type="number" value={draft.slo[target]}
          onChange={(value) => onChange({ ...draft, slo: { ...draft.slo, [target]: value } })}
          error={fieldError(error, `slo.${target}`)} hint="Empty: not stated." />
      ))}
      {sloError && <p className="field-error">{sloError}</p>}
      <Field id="scaleToZeroAfterSeconds" label="Scale to zero after (seconds without a request)" numeric type="number" value={draft.scaleToZeroAfterSeconds}
        onChange={(value) => onChange({ ...draft, scaleToZeroAfterSeconds: value })} error={fieldError(error, 'scaleToZeroAfterSeconds')}
        hint="60 to 86,400; empty: never below the minimum replicas. At zero nothing is billed; the next request waits for a replica to start." />
      <Field id="coldStartQueueLimit" label="Cold-start queue limit (requests per server)" numeric type="number" value={draft.coldStartQueueLimit}
        onChange={(value) => onChange({ ...draft, coldStartQueueLimit: value })} error={fieldError(error, 'coldStartQueueLimit')}
        hint="1 to 10,000 requests may wait for a first replica; past it they get 503 with Retry-After." />
    </div>
  );
}
