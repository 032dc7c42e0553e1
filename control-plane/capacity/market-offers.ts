import { seededRandom } from '../../common/seeded-random';
import type { GpuOffer } from '../replicas/gpu-offer';

/** One kind of machine on the simulated marketplace. */
export interface MarketOfferSpec {
  id: string;
  gpuName: string;
  gpuMemoryGb: number;
  region: string;
  pricePerHour: number;
  /** Machines of this kind for rent. */
  count: number;
}

const MACHINES: Array<Omit<MarketOfferSpec, 'id' | 'region' | 'count'>> = [
  { gpuName: 'RTX 4090', gpuMemoryGb: 24, pricePerHour: 0.44 },
  { gpuName: 'L40S', gpuMemoryGb: 48, pricePerHour: 0.99 },
  { gpuName: 'A100 40GB', gpuMemoryGb: 40, pricePerHour: 1.29 },
  { gpuName: 'A100 80GB', gpuMemoryGb: 80, pricePerHour: 1.79 },
  { gpuName: 'H100 80GB', gpuMemoryGb: 80, pricePerHour: 2.49 },
];
const REGIONS = ['us-east', 'us-west', 'eu-central'];

/** The default marketplace: every machine kind in every region, prices ±15 % around a list price, 0–3 machines each. */
export function seededMarket(seed: number): MarketOfferSpec[] {
  const random = seededRandom(seed);
  return MACHINES.flatMap((machine) => REGIONS.map((region) => ({
    ...machine,
    id: `${machine.gpuName.toLowerCase().replace(/[^a-z0-9]+/g, '-')}-${region}`,
    region,
    pricePerHour: roundPrice(machine.pricePerHour * (0.85 + 0.3 * random())),
    count: Math.floor(random() * 4),
  })));
}

/** One step of a random walk of prices (at most ±`volatility`, never below a cent). */
export function driftPrices(offers: MarketOfferSpec[], random: () => number, volatility: number): MarketOfferSpec[] {
  return offers.map((offer) => ({ ...offer, pricePerHour: Math.max(0.01, roundPrice(offer.pricePerHour * (1 + volatility * (2 * random() - 1)))) }));
}

export function toOffer(spec: MarketOfferSpec, used: number): GpuOffer {
  return {
    id: `market:${spec.id}`, provider: 'market', gpuName: spec.gpuName, gpuMemoryGb: spec.gpuMemoryGb, region: spec.region,
    pricePerHour: spec.pricePerHour, available: Math.max(0, spec.count - used),
  };
}

function roundPrice(price: number): number {
  return Math.round(price * 10_000) / 10_000;
}
