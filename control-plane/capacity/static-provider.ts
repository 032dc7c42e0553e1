import type { DataSource, Repository } from 'typeorm';
import { IsNull } from 'typeorm';
import type { Deployment } from '../deployments/deployment.entity';
import { AppError } from '../errors/app-error';
import { newId } from '../ids';
import type { CapacityProvider, HostLostListener } from '../replicas/capacity-provider';
import type { Replica } from '../replicas/replica.entity';
import { hashSecret, newSecret } from '../secrets';
import { GpuHost } from './gpu-host.entity';
import type { GpuOffer } from '../replicas/gpu-offer';

/** What one host's Hello may have recorded: more models, or longer ids, than any catalog has. */
const MAX_CACHED_MODELS = 256;
const MAX_MODEL_ID = 256;

export interface StaticHostInput {
  name: string;
  gpuName: string;
  gpuMemoryGb: number;
  region: string;
  pricePerHour: number;
}

/**
 * Machines an operator registered at a set price. Each runs an agent started with the host's
 * token; a free host is an offer, and once placement assigns it a replica the host's agent
 * joins as that replica (until then the control plane refuses it with `host_idle` and it
 * retries with backoff). Releasing the replica drains the agent, which exits: run host agents
 * under a supervisor (systemd, a container restart policy) so they come back idle.
 */
export class StaticProvider implements CapacityProvider {
  readonly kind = 'static';
  private readonly hosts: Repository<GpuHost>;

  constructor(dataSource: DataSource, private readonly onHostLost: HostLostListener) {
    this.hosts = dataSource.getRepository(GpuHost);
  }

  async register(input: StaticHostInput): Promise<{ host: GpuHost; hostToken: string }> {
    validate(input);
    const hostToken = newSecret('ht-');
    const host = await this.hosts.save(this.hosts.create({
      id: newId('host'), ...input, name: input.name.trim(), hostTokenHash: hashSecret(hostToken), replicaId: null, removedAt: null, cachedModels: [],
    }));
    return { host, hostToken };
  }

  async list(): Promise<GpuHost[]> {
    return await this.hosts.find({ where: { removedAt: IsNull() }, order: { createdAt: 'ASC' } });
  }

  /** The host's replica (if any) loses its host and is replaced elsewhere. */
  async remove(id: string): Promise<GpuHost> {
    const host = await this.hosts.findOne({ where: { id, removedAt: IsNull() } });
    if (!host) throw new AppError('not_found', `no static host '${id}'`, { param: 'id' });
    host.removedAt = new Date();
    const replicaId = host.replicaId;
    host.replicaId = null;
    await this.hosts.save(host);
    if (replicaId) this.onHostLost(replicaId, `its static host ${host.name} was removed`);
    return host;
  }

  /** The host a token belongs to (the agent presents it in Hello). */
  async hostByToken(tokenHash: string): Promise<GpuHost | null> {
    return await this.hosts.findOne({ where: { hostTokenHash: tokenHash, removedAt: IsNull() } });
  }

  /** Records what the host's weights cache holds (its agent's Hello, bounded); written only when it changed. */
  async cachedModelsReported(tokenHash: string, models: readonly string[]): Promise<void> {
    const sorted = [...new Set(models.filter((model) => model.length > 0 && model.length <= MAX_MODEL_ID))].sort().slice(0, MAX_CACHED_MODELS);
    await this.hosts.createQueryBuilder().update(GpuHost).set({ cachedModels: () => 'CAST(:models AS jsonb)' })
      .where('host_token_hash = :tokenHash AND removed_at IS NULL AND cached_models <> CAST(:models AS jsonb)', { tokenHash })
      .setParameter('models', JSON.stringify(sorted))
      .execute();
  }

  async offers(): Promise<GpuOffer[]> {
    const free = await this.hosts.find({ where: { removedAt: IsNull(), replicaId: IsNull() } });
    return free.map((host) => ({
      id: `static:${host.id}`, provider: 'static', gpuName: host.gpuName, gpuMemoryGb: host.gpuMemoryGb, region: host.region,
      pricePerHour: host.pricePerHour, available: 1, cachedModels: host.cachedModels,
    }));
  }

  async launch(offer: GpuOffer, _deployment: Deployment, replica: Replica): Promise<void> {
    const hostId = offer.id.replace(/^static:/, '');
    // Conditional: two placements racing for one host cannot both get it.
    const result = await this.hosts.update({ id: hostId, replicaId: IsNull(), removedAt: IsNull() }, { replicaId: replica.id });
    if (!result.affected) throw new Error(`static host ${hostId} was taken meanwhile`);
  }

  async terminate(replicaId: string): Promise<void> {
    await this.hosts.update({ replicaId }, { replicaId: null });
  }

  async stopAll(): Promise<void> {}
}

function validate(input: StaticHostInput): void {
  if (!input.name?.trim()) throw new AppError('invalid_request', 'name must not be empty', { param: 'name' });
  if (!input.gpuName?.trim()) throw new AppError('invalid_request', 'gpuName must not be empty', { param: 'gpuName' });
  // The column keeps two decimals (numeric(8,2), CHECK > 0): 5e-324 passed "above 0" and then failed the CHECK as a 500.
  if (!(input.gpuMemoryGb >= 0.01 && input.gpuMemoryGb <= 10_000)) throw new AppError('invalid_request', 'gpuMemoryGb must be a number from 0.01 to 10000', { param: 'gpuMemoryGb' });
  if (!/^[a-z0-9-]{1,64}$/.test(input.region ?? '')) throw new AppError('invalid_request', 'region must be 1-64 lowercase letters, digits or "-"', { param: 'region' });
  if (!(input.pricePerHour >= 0 && input.pricePerHour <= 1_000)) throw new AppError('invalid_request', 'pricePerHour must be from 0 to 1000', { param: 'pricePerHour' });
}
