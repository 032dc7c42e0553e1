import { PRIORITY_CATALOG_ENGINE_KINDS } from '../../common/engine-kinds';
import type { CatalogModel } from '../catalog/catalog';
import type { ProviderKind } from './deployment.entity';
import { AppError } from '../errors/app-error';

/**
 * Catalog engines whose servers schedule by request priority (common/engine-kinds.ts). Local
 * replicas of these models run the built-in CPU engine or llama.cpp, whose owner-first queue
 * lives in the agent.
 */
const PRIORITY_ENGINES: ReadonlySet<string> = new Set(PRIORITY_CATALOG_ENGINE_KINDS);

/** The per-token prices of a shareable model, as exact decimal strings (never summed as floats). */
export interface SharedPrices {
  inputPerMillion: string;
  outputPerMillion: string;
}

/** Why a model cannot be shared, or null when it can; the same rule for the guest's model list. */
export function sharingRefusal(model: CatalogModel): string | null {
  if (model.modality !== 'text' || model.task !== 'chat') return `'${model.id}' is not a chat model; only text chat models can be shared`;
  if (!model.official) return `'${model.id}' is not an official catalog model; only official models can be shared`;
  if (!model.sharedPricing) return `'${model.id}' has no shared per-token prices in the catalog`;
  if (!PRIORITY_ENGINES.has(model.engine)) return `'${model.id}' runs on ${model.engine}, which has no priority scheduling`;
  return null;
}

/** Throws a 400 naming why when the deployment cannot open its idle capacity to guests. */
export function assertShareable(model: CatalogModel, provider: ProviderKind): void {
  const refusal = sharingRefusal(model);
  if (refusal) throw new AppError('invalid_request', `shareIdleCapacity: ${refusal}`, { param: 'shareIdleCapacity' });
  if (provider === 'external') {
    throw new AppError('invalid_request',
      'shareIdleCapacity: an external deployment\'s agents join by themselves, so the platform cannot restart them with priority scheduling; use a provider the platform launches',
      { param: 'shareIdleCapacity' });
  }
}

export function sharedPrices(model: CatalogModel): SharedPrices | null {
  if (sharingRefusal(model)) return null;
  const pricing = model.sharedPricing!;
  return { inputPerMillion: String(pricing.inputPerMillion), outputPerMillion: String(pricing.outputPerMillion) };
}
