import type { Logger } from 'pino';
import { seededRandom } from '../../common/seeded-random';
import { AppError } from '../errors/app-error';
import type { Deployment } from '../deployments/deployment.entity';
import type { CapacityProvider, HostLostListener } from '../replicas/capacity-provider';
import type { LocalProvider } from '../providers/local-provider';
import type { Replica } from '../replicas/replica.entity';
import type { GpuOffer } from '../replicas/gpu-offer';
import { driftPrices, seededMarket, toOffer, type MarketOfferSpec } from './market-offers';

export interface MarketProviderOptions {
  /** Same seed, same market. @default 42 */
  seed: number;
  /** How often prices take one random-walk step; 0 keeps them still (tests script them). */
  priceDriftIntervalMs: number;
  /** Largest relative price change per step. @default 0.05 */
  volatility: number;
  /** Starting offers; default: the seeded market. */
  offers?: MarketOfferSpec[];
}

/**
 * A rented-GPU marketplace: machine kinds in regions, each with a count and an hourly price
 * that drifts over time. Renting a machine here starts a real agent process on this host
 * (through a LocalProvider) that reports the rented GPU; the market can also take machines
 * back (`reclaim`), as spot markets do, and the replicas on them are replaced. Scriptable:
 * tests set offers and prices directly.
 */
export class MarketProvider implements CapacityProvider {
  readonly kind = 'market';
  private specs: MarketOfferSpec[];
  /** Which offer each replica rents. */
  private readonly rented = new Map<string, string>();
  private readonly random: () => number;
  private timer: NodeJS.Timeout | undefined;
  private readonly listeners: Array<() => void> = [];

  constructor(
    private readonly hosts: LocalProvider,
    private readonly options: MarketProviderOptions,
    private readonly onHostLost: HostLostListener,
    private readonly logger: Logger,
  ) {
    this.specs = options.offers ?? seededMarket(options.seed);
    this.random = seededRandom(options.seed + 1);
    if (options.priceDriftIntervalMs > 0) {
      this.timer = setInterval(() => this.drift(), options.priceDriftIntervalMs);
      this.timer.unref();
    }
  }

  async offers(): Promise<GpuOffer[]> {
    return this.specs.map((spec) => toOffer(spec, this.rentedOf(spec.id)));
  }

  /** Called after offers or prices change, so placement can retry at once. */
  onChange(listener: () => void): void {
    this.listeners.push(listener);
  }

  /** Replaces the whole market (tests, operators scripting a scenario). */
  setOffers(specs: MarketOfferSpec[]): void {
    for (const spec of specs) {
      if (!(spec.pricePerHour > 0) || !(spec.gpuMemoryGb > 0) || !Number.isInteger(spec.count) || spec.count < 0) {
        throw new AppError('invalid_request', `offer ${spec.id}: pricePerHour and gpuMemoryGb must be above 0, count a whole number`, { param: 'offers' });
      }
    }
    this.specs = specs.map((spec) => ({ ...spec }));
    this.changed();
  }

  /** Changes one offer's price or count. */
  updateOffer(id: string, changes: Partial<Pick<MarketOfferSpec, 'pricePerHour' | 'count'>>): void {
    const spec = this.specs.find((candidate) => candidate.id === id || `market:${candidate.id}` === id);
    if (!spec) throw new AppError('not_found', `no market offer '${id}'`, { param: 'id' });
    if (changes.pricePerHour !== undefined && !(changes.pricePerHour > 0)) throw new AppError('invalid_request', 'pricePerHour must be above 0', { param: 'pricePerHour' });
    if (changes.count !== undefined && !(Number.isInteger(changes.count) && changes.count >= 0)) throw new AppError('invalid_request', 'count must be a whole number', { param: 'count' });
    Object.assign(spec, changes);
    this.changed();
  }

  /** The market takes back every machine of an offer (none is left for rent): their replicas lose their hosts. */
  async reclaim(id: string): Promise<string[]> {
    const offerId = id.startsWith('market:') ? id.slice(7) : id;
    const spec = this.specs.find((candidate) => candidate.id === offerId);
    if (!spec) throw new AppError('not_found', `no market offer '${id}'`, { param: 'id' });
    spec.count = 0;
    const replicaIds = [...this.rented].filter(([, rentedOffer]) => rentedOffer === offerId).map(([replicaId]) => replicaId);
    for (const replicaId of replicaIds) {
      this.hosts.processOf(replicaId)?.kill('SIGKILL');
      await this.terminate(replicaId);
      this.onHostLost(replicaId, `the market reclaimed its ${offerId} machine`);
    }
    return replicaIds;
  }

  async launch(offer: GpuOffer, deployment: Deployment, replica: Replica, joinToken: string): Promise<void> {
    const spec = this.specs.find((candidate) => `market:${candidate.id}` === offer.id);
    if (!spec || this.rentedOf(spec.id) >= spec.count) throw new Error(`market offer ${offer.id} has no machine left`);
    this.rented.set(replica.id, spec.id);
    this.hosts.start(deployment, replica, joinToken, { WORKER_GPUS: `${spec.gpuName}:${spec.gpuMemoryGb}` });
    this.logger.info({ replicaId: replica.id, offer: offer.id, pricePerHour: offer.pricePerHour }, 'rented a market machine');
  }

  async terminate(replicaId: string): Promise<void> {
    const had = this.rented.delete(replicaId);
    await this.hosts.terminate(replicaId);
    if (had) this.changed();
  }

  async stopAll(): Promise<void> {
    clearInterval(this.timer);
    this.rented.clear();
    await this.hosts.stopAll();
  }

  /** Last resort on a forced exit: simulated hosts must not outlive the server. */
  killAll(): void {
    this.hosts.killAll();
  }

  private drift(): void {
    this.specs = driftPrices(this.specs, this.random, this.options.volatility);
    this.changed();
  }

  private rentedOf(specId: string): number {
    let count = 0;
    for (const rentedOffer of this.rented.values()) if (rentedOffer === specId) count++;
    return count;
  }

  private changed(): void {
    for (const listener of this.listeners) listener();
  }
}
