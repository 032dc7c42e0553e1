import type { CatalogModel } from '../catalog/catalog';
import type { Deployment } from '../deployments/deployment.entity';
import type { CapacityProvider } from './capacity-provider';
import type { GpuOffer } from './gpu-offer';

export type OfferChoice = { offer: GpuOffer } | { offer: null; reason: string };

/**
 * Which offer a new replica goes on: never one above the deployment's price cap; among those
 * whose GPU memory fits the model, the cheapest; at that price, one whose machine already holds
 * the model's weights (its start skips the download), then the one with most machines left, then
 * by id, so the choice is stable. A cache never buys a dearer machine: the price decides first.
 * When nothing qualifies, says why in the user's terms.
 */
export async function chooseOffer(provider: CapacityProvider, deployment: Deployment, model: CatalogModel): Promise<OfferChoice> {
  const offers = (await provider.offers()).filter((offer) => offer.available > 0);
  const fitting = offers.filter((offer) => offer.gpuMemoryGb >= model.gpuMemoryGb);
  const affordable = fitting.filter((offer) => offer.pricePerHour <= deployment.priceCapPerHour);
  const cached = (offer: GpuOffer) => (offer.cachedModels?.includes(model.id) ? 1 : 0);
  affordable.sort((left, right) => left.pricePerHour - right.pricePerHour || cached(right) - cached(left)
    || right.available - left.available || left.id.localeCompare(right.id));
  if (affordable.length > 0) return { offer: affordable[0] };
  const cap = formatPrice(deployment.priceCapPerHour);
  if (fitting.length === 0) {
    return { offer: null, reason: `no ${provider.kind} offer has the ${model.gpuMemoryGb} GB of GPU memory ${model.id} needs; waiting for capacity` };
  }
  const cheapest = fitting.reduce((best, offer) => (offer.pricePerHour < best.pricePerHour ? offer : best));
  return {
    offer: null,
    reason: `no offer at or under ${cap}/h (the cheapest that fits is ${cheapest.gpuName} in ${cheapest.region} at ${formatPrice(cheapest.pricePerHour)}/h); waiting for a cheaper offer or a higher price cap`,
  };
}

export function formatPrice(price: number): string {
  return `$${price.toFixed(price < 1 ? 4 : 2).replace(/(\.\d\d\d*?)0+$/, '$1')}`;
}
