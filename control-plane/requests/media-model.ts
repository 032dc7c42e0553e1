import type { Catalog, CatalogModel } from '../catalog/catalog';
import type { Deployment } from '../deployments/deployment.entity';
import { AppError } from '../errors/app-error';
import type { FieldReader } from './field-reader';
import { shortened } from '../errors/quote-value';

/**
 * The model a media call names, checked in the order of docs/api-contract.md#image-errors: unknown id 404 `model_not_found`,
 * a model of another modality 400 `wrong_modality`, then a model other than the endpoint's 400.
 */
export function resolveMediaModel(catalog: Pick<Catalog, 'find'>, deployment: Deployment, requested: string | undefined, modality: 'image' | 'video'): CatalogModel {
  if (requested === undefined) throw new AppError('invalid_request', `model is required: this endpoint serves '${deployment.modelId}'`, { param: 'model' });
  const model = catalog.find(requested);
  if (!model) throw new AppError('model_not_found', `model '${shortened(requested)}' does not exist; this endpoint serves '${deployment.modelId}'`, { param: 'model' });
  if (model.modality !== modality) {
    throw new AppError('wrong_modality', `'${model.id}' is a ${model.modality} model, not a ${modality} model`, { param: 'model' });
  }
  if (model.id !== deployment.modelId) {
    throw new AppError('model_mismatch', `model '${model.id}' is not served here; this endpoint serves '${deployment.modelId}'`, { param: 'model' });
  }
  return model;
}

/** `WIDTHxHEIGHT` sizes sorted by width, then height, as the error messages of docs/api-contract.md list them. */
export function sortedSizes(sizes: readonly string[]): string[] {
  const dimensions = (size: string) => size.split('x').map(Number);
  return [...sizes].sort((left, right) => {
    const [leftWidth, leftHeight] = dimensions(left);
    const [rightWidth, rightHeight] = dimensions(right);
    return leftWidth - rightWidth || leftHeight - rightHeight;
  });
}

export function parseSize(size: string): { width: number; height: number } | null {
  const match = /^(\d{1,5})x(\d{1,5})$/.exec(size);
  return match ? { width: Number(match[1]), height: Number(match[2]) } : null;
}

/** The generation controls image and video models share, only when the client sent them. */
export interface GenerationControls {
  negative_prompt?: string;
  seed?: number;
  steps?: number;
}

export function readGenerationControls(fields: FieldReader): GenerationControls {
  const controls: GenerationControls = {};
  const negativePrompt = fields.string('negative_prompt');
  if (negativePrompt !== undefined) controls.negative_prompt = negativePrompt;
  const seed = fields.integer('seed', 0, 2 ** 53 - 1);
  if (seed !== undefined) controls.seed = seed;
  const steps = fields.integer('steps', 1, 500);
  if (steps !== undefined) controls.steps = steps;
  return controls;
}
