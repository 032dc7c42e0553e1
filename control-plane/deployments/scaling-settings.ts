import { idleTtftMs, type CatalogModel } from '../catalog/catalog';
import { AppError } from '../errors/app-error';
import { quoteValue } from '../errors/quote-value';
import { DEPLOYMENT_SCALING_POLICIES, type DeploymentScalingPolicy, type SloTargets } from './scaling-policy-names';

/** A deployment's autoscaling settings of issue 39 (deployment.entity.ts says what each column means). */
export interface ScalingSettings {
  readonly scalingPolicy: DeploymentScalingPolicy;
  readonly sloTtftP95Ms: number | null;
  readonly sloTpotP95Ms: number | null;
  readonly sloQueueWaitP95Ms: number | null;
  readonly scaleToZeroAfterSeconds: number | null;
  readonly coldStartQueueLimit: number;
}

/**
 * Changes as a caller sends them: a field left out (undefined) keeps its value. `slo`, when
 * sent, replaces the whole SLO (a target left out or null is not stated; null clears them all);
 * `scaleToZeroAfterSeconds` null means never.
 */
export interface ScalingChanges {
  scalingPolicy?: string | null;
  slo?: Partial<SloTargets> | null;
  scaleToZeroAfterSeconds?: number | null;
  coldStartQueueLimit?: number | null;
}

export const DEFAULT_SCALING_SETTINGS: ScalingSettings = {
  scalingPolicy: 'concurrency', sloTtftP95Ms: null, sloTpotP95Ms: null, sloQueueWaitP95Ms: null, scaleToZeroAfterSeconds: null, coldStartQueueLimit: 100,
};

/**
 * The bounds of each setting. The floors are what no replica does better even idle: a first
 * token in under 50 ms (or under the idle prefill of the model's mean prompt, where the catalog
 * states its service figures), a token every 5 ms per sequence, a media job picked up from the
 * durable queue in under 100 ms (the scheduler's claim and dispatch). The ceilings (an hour;
 * a minute per output token) are far past any SLO a caller would pay replicas to meet: typos.
 * Scale to zero waits at least a minute (a replica takes about that to start, so anything
 * shorter pays a start-up for each pause) and at most a day.
 */
export const SLO_BOUNDS = {
  ttftP95Ms: { min: 50, max: 3_600_000 },
  tpotP95Ms: { min: 5, max: 60_000 },
  queueWaitP95Ms: { min: 100, max: 3_600_000 },
} as const;
export const SCALE_TO_ZERO_AFTER_SECONDS = { min: 60, max: 86_400 } as const;
export const COLD_START_QUEUE_LIMIT = { min: 1, max: 10_000 } as const;

type SloField = keyof SloTargets;
const SLO_FIELDS: readonly SloField[] = ['ttftP95Ms', 'tpotP95Ms', 'queueWaitP95Ms'];

/**
 * `current` with `changes` applied, checked against `model`: a bad value is a 400 (GraphQL
 * BAD_USER_INPUT) whose `param` names the field (`slo.ttftP95Ms` for an SLO target) and whose
 * message says what is allowed.
 */
export function scalingSettingsOf(model: CatalogModel, changes: ScalingChanges, current: ScalingSettings = DEFAULT_SCALING_SETTINGS): ScalingSettings {
  const scalingPolicy = scalingPolicyOf(changes.scalingPolicy, current.scalingPolicy);
  const slo: SloTargets = changes.slo === undefined
    ? { ttftP95Ms: current.sloTtftP95Ms, tpotP95Ms: current.sloTpotP95Ms, queueWaitP95Ms: current.sloQueueWaitP95Ms }
    : { ttftP95Ms: changes.slo?.ttftP95Ms ?? null, tpotP95Ms: changes.slo?.tpotP95Ms ?? null, queueWaitP95Ms: changes.slo?.queueWaitP95Ms ?? null };
  for (const field of SLO_FIELDS) checkSloTarget(model, field, slo[field]);
  if (scalingPolicy === 'slo') requireSlo(model, slo);
  const scaleToZeroAfterSeconds = changes.scaleToZeroAfterSeconds === undefined ? current.scaleToZeroAfterSeconds : changes.scaleToZeroAfterSeconds;
  if (scaleToZeroAfterSeconds !== null) checkInteger('scaleToZeroAfterSeconds', scaleToZeroAfterSeconds, SCALE_TO_ZERO_AFTER_SECONDS, ' (or null: never)');
  const coldStartQueueLimit = changes.coldStartQueueLimit ?? current.coldStartQueueLimit;
  checkInteger('coldStartQueueLimit', coldStartQueueLimit, COLD_START_QUEUE_LIMIT, '');
  return {
    scalingPolicy, sloTtftP95Ms: slo.ttftP95Ms, sloTpotP95Ms: slo.tpotP95Ms, sloQueueWaitP95Ms: slo.queueWaitP95Ms,
    scaleToZeroAfterSeconds, coldStartQueueLimit,
  };
}

/** The SLO of a deployment row, as the policies read it. */
export function sloOf(settings: Pick<ScalingSettings, 'sloTtftP95Ms' | 'sloTpotP95Ms' | 'sloQueueWaitP95Ms'>): SloTargets | null {
  // `?? null`: a row built in memory before it was read back lacks the columns the database defaults.
  const ttftP95Ms = settings.sloTtftP95Ms ?? null;
  const tpotP95Ms = settings.sloTpotP95Ms ?? null;
  const queueWaitP95Ms = settings.sloQueueWaitP95Ms ?? null;
  return ttftP95Ms === null && tpotP95Ms === null && queueWaitP95Ms === null ? null : { ttftP95Ms, tpotP95Ms, queueWaitP95Ms };
}

function scalingPolicyOf(value: string | null | undefined, current: DeploymentScalingPolicy): DeploymentScalingPolicy {
  if (value === undefined || value === null) return current;
  if ((DEPLOYMENT_SCALING_POLICIES as readonly string[]).includes(value)) return value as DeploymentScalingPolicy;
  throw new AppError('invalid_request', `scalingPolicy must be one of ${DEPLOYMENT_SCALING_POLICIES.map((name) => `'${name}'`).join(', ')}, got ${quoteValue(value)}`,
    { param: 'scalingPolicy' });
}

/** Which targets a model's requests are measured by: streamed text has a first token and tokens after it; media waits in a queue. */
function measuredTargets(model: CatalogModel): readonly SloField[] {
  if (model.modality !== 'text') return ['queueWaitP95Ms'];
  // Embeddings answer in one piece: no first token, no tokens after it, and no durable queue.
  return model.task === 'embedding' ? [] : ['ttftP95Ms', 'tpotP95Ms'];
}

function checkSloTarget(model: CatalogModel, field: SloField, value: number | null): void {
  if (value === null) return;
  const param = `slo.${field}`;
  if (!measuredTargets(model).includes(field)) {
    const kind = model.modality === 'image' ? 'an image model' : model.modality === 'video' ? 'a video model' : model.task === 'embedding' ? 'an embedding model' : 'a text model';
    const allowed = measuredTargets(model);
    throw new AppError('invalid_request',
      `${param} does not apply to '${model.id}', ${kind}: ${allowed.length === 0 ? 'it states no SLO' : `its SLO states ${allowed.map((name) => `slo.${name}`).join(' and ')}`}`,
      { param });
  }
  const bounds = SLO_BOUNDS[field];
  const idle = field === 'ttftP95Ms' ? idleTtftMs(model) : null;
  const floor = Math.max(bounds.min, idle ?? 0);
  if (!Number.isInteger(value) || value < floor || value > bounds.max) {
    const why = idle !== null && idle > bounds.min ? ` (an idle replica of '${model.id}' takes ${idle} ms to prefill its mean prompt)` : '';
    throw new AppError('invalid_request', `${param} must be an integer number of milliseconds from ${floor} to ${bounds.max}${why}, got ${quoteValue(value)}`, { param });
  }
}

/** The `slo` policy sizes for a target: text needs its TTFT, media its queue wait. */
function requireSlo(model: CatalogModel, slo: SloTargets): void {
  const needed: SloField | null = model.modality !== 'text' ? 'queueWaitP95Ms' : model.task === 'embedding' ? null : 'ttftP95Ms';
  if (needed === null) {
    throw new AppError('invalid_request', `scalingPolicy 'slo' needs an SLO, and '${model.id}' (an embedding model) states none: use 'concurrency'`, { param: 'scalingPolicy' });
  }
  if (slo[needed] === null) {
    throw new AppError('invalid_request', `scalingPolicy 'slo' needs slo.${needed} for '${model.id}': state it (from ${SLO_BOUNDS[needed].min} to ${SLO_BOUNDS[needed].max} ms) or keep scalingPolicy 'concurrency'`,
      { param: `slo.${needed}` });
  }
}

function checkInteger(param: string, value: number, bounds: { min: number; max: number }, note: string): void {
  if (!Number.isInteger(value) || value < bounds.min || value > bounds.max) {
    throw new AppError('invalid_request', `${param} must be an integer from ${bounds.min} to ${bounds.max}${note}, got ${quoteValue(value)}`, { param });
  }
}
