import { AppError } from '../errors/app-error';
import { quoteValue, shortened } from '../errors/quote-value';
import type { Deployment } from './deployment.entity';

/** Choices a 404 lists before "… and N more": the message stays short for a workspace with hundreds of deployments. */
export const LISTED_CHOICES = 10;

/**
 * The deployment a request on the workspace base URL (`/v1/…`) names with its `model`: a
 * deployment slug of the workspace, else a catalog model id that exactly one of its
 * deployments serves. A slug wins over a model id that happens to spell the same (slugs are
 * what `GET /v1/models` lists, so a listed id always reaches its deployment).
 *
 * Only `deployments` (the caller's workspace's) are looked at: another workspace's slug or
 * model is unknown here by construction, and answers the same 404 as a made-up one.
 */
export function pickDeployment(deployments: readonly Deployment[], model: unknown): Deployment {
  if (model === undefined || model === null) {
    throw new AppError('invalid_request', `model is required on the workspace base URL /v1: a deployment slug or a catalog model id (${choices(deployments)})`, { param: 'model' });
  }
  if (typeof model !== 'string') throw new AppError('invalid_request', `model must be a string, got ${quoteValue(model)}`, { param: 'model' });
  const bySlug = deployments.find((deployment) => deployment.slug === model);
  if (bySlug) return bySlug;
  const serving = deployments.filter((deployment) => deployment.modelId === model);
  if (serving.length === 1) return serving[0];
  if (serving.length > 1) {
    const slugs = serving.slice(0, LISTED_CHOICES).map((deployment) => deployment.slug).join(', ');
    const more = serving.length > LISTED_CHOICES ? ` and ${serving.length - LISTED_CHOICES} more` : '';
    throw new AppError('invalid_request', `model '${shortened(model)}' is served by ${serving.length} deployments of this workspace (${slugs}${more}); set model to one of their slugs`, { param: 'model' });
  }
  throw new AppError('model_not_found', `model '${shortened(model)}' is neither a deployment slug nor a model served in this workspace (${choices(deployments)})`, { param: 'model' });
}

/** The slugs a request may name, with the model each serves, at most LISTED_CHOICES of them. */
function choices(deployments: readonly Deployment[]): string {
  if (deployments.length === 0) return 'the workspace has no deployments';
  const listed = deployments.slice(0, LISTED_CHOICES).map((deployment) => `${deployment.slug} (${deployment.modelId})`).join(', ');
  const more = deployments.length > LISTED_CHOICES ? ` and ${deployments.length - LISTED_CHOICES} more: GET /v1/models lists them` : '';
  return `choices: ${listed}${more}`;
}
