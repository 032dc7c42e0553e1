import type { AuthenticatedKey } from '../api-keys/api-key.service';
import type { CatalogModel } from '../catalog/catalog';
import type { Deployment } from '../deployments/deployment.entity';
import { AppError } from '../errors/app-error';
import { shortened } from '../errors/quote-value';
import { completionBound } from './completion-bound';

/**
 * Admission rules every kind of work shares, decided here once so that no endpoint can forget
 * one: a workspace whose prepaid credit is used up was refused on chat but accepted on images
 * (a 202 and a GPU run paid by nobody) while each route kept its own copy of the check.
 */

/** 402 `insufficient_quota` before anything runs, on every endpoint that spends. */
export function refuseWithoutCredit(key: Pick<AuthenticatedKey, 'creditExhausted'>): void {
  const refusal = creditRefusal(key);
  if (refusal) throw refusal;
}

export function creditRefusal(key: Pick<AuthenticatedKey, 'creditExhausted'>): AppError | null {
  return key.creditExhausted ? new AppError('insufficient_quota', 'the workspace has no credit left; add credit to continue') : null;
}

/**
 * 503 on a paused deployment. Text answers `deployment_paused`; a media job, which would wait in
 * the queue for a replica that never comes, `no_pod_available` (the contract's codes).
 */
export function refusePaused(deployment: Pick<Deployment, 'status'>, work: 'text' | 'media'): void {
  const refusal = pausedRefusal(deployment, work);
  if (refusal) throw refusal;
}

export function pausedRefusal(deployment: Pick<Deployment, 'status'>, work: 'text' | 'media'): AppError | null {
  if (deployment.status !== 'Paused') return null;
  if (work === 'text') return new AppError('deployment_paused', 'this deployment is paused; resume it to serve requests', { retryAfterSeconds: 60 });
  return new AppError('no_pod_available', 'this deployment is paused: no replica will take the job; resume it first', { retryAfterSeconds: 60 });
}

/** A request's optional `model` names the deployment's model or is left out. */
export function checkModelField(deployment: Pick<Deployment, 'modelId'>, model: string | undefined): void {
  if (model !== undefined && model !== deployment.modelId) {
    throw new AppError('model_mismatch', `model '${shortened(model)}' is not served here; this endpoint serves '${deployment.modelId}' (the field may be omitted)`, { param: 'model' });
  }
}

/**
 * A chat or completions request fits the deployment's model: the field names it, the model is
 * a text model that generates (not an embedding model), and chat has a chat template.
 * `servedBy` describes the endpoints a model does answer (servedEndpoints, control-plane/openai/).
 */
export function checkTextModel(
  deployment: Pick<Deployment, 'modelId'>, model: string | undefined, endpoint: 'chat.completions' | 'completions' | 'responses',
  entry: CatalogModel | undefined, servedBy: (model: CatalogModel) => string,
): void {
  checkModelField(deployment, model);
  if (!entry) return;
  if (entry.modality !== 'text') {
    throw new AppError('wrong_modality', `'${deployment.modelId}' is an ${entry.modality} model; use the ${entry.modality} endpoints`, { param: 'model' });
  }
  if (entry.task === 'embedding') {
    throw new AppError('unsupported_endpoint', `'${deployment.modelId}' is an embedding model; this deployment serves ${servedBy(entry)} (and GET /v1/models)`);
  }
  if (endpoint !== 'completions' && entry.task === 'completion') {
    throw new AppError('unsupported_endpoint', `'${deployment.modelId}' is a base model without a chat template; use POST /v1/completions`, { param: endpoint === 'responses' ? 'input' : 'messages' });
  }
}

/**
 * The most tokens a text request may use, held against its key's TPD from admission until it
 * is settled to its real usage: its body's bytes (no prompt has more tokens than bytes) plus its
 * completion bound (completion-bound.ts: for a request without one, DEFAULT_COMPLETION_HOLD).
 */
export function textTokenHold(bodyBytes: number, fields: Record<string, unknown>): number {
  return bodyBytes + completionBound(fields).total;
}

/**
 * TPD: a request whose worst case passes what is left of its key's day is clamped, not refused.
 * Its completion bound is lowered by `overLimitTokens` (how far its completions would pass what
 * the day has left, spread over them, at least 1 token each) and written into the body the engine
 * gets (`max_completion_tokens` when the client used it, else `max_tokens`), so one request takes
 * the day past the limit by its prompt at most (TPD 50 once served 64,001 tokens in one call). Refusing instead would have to count the
 * prompt by its bytes, the only bound known before the engine tokenizes it, and would turn away
 * requests that fit. Null when there is nothing to lower.
 */
export function clampCompletion(fields: Record<string, unknown>, overLimitTokens: number): { fields: Record<string, unknown>; body: Buffer; freedTokens: number } | null {
  const { perChoice, completions, field } = completionBound(fields);
  const lowered = Math.max(1, perChoice - Math.ceil(overLimitTokens / completions));
  if (lowered >= perChoice) return null;
  const clamped = { ...fields, [field]: lowered };
  return { fields: clamped, body: Buffer.from(JSON.stringify(clamped)), freedTokens: (perChoice - lowered) * completions };
}
