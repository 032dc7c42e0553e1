import { GraphQLJSONObject } from 'graphql-scalars';
import { Arg, Ctx, Float, ID, Int, Mutation, Query, Resolver } from 'type-graphql';
import type { AdminPort, GpuOffer } from '../../../control-plane/api/admin';
import { AppError } from '../../../control-plane/api/errors';
import { requireOperator, workspaceOf, type GraphQLContext } from '../graphql-context';
import { DecimalScalar } from '../types/decimal.scalar';
import { GpuOfferType, MarketOfferInput, RegisterStaticHostPayload, StaticHostInput, StaticHostType } from '../types/capacity.type';
import { CatalogModelType, toCatalogModelType } from '../types/catalog-model.type';
import { DatabaseCost, DATABASE_WEIGHTS } from '../database-cost';

/** GPU offers (workspaces) and provider and catalog administration (the operator token). */
@Resolver()
export class CapacityResolver {
  constructor(private readonly admin: Pick<AdminPort, 'agentReach' | 'billing' | 'capacity' | 'catalogAdmin'>) {}

  @DatabaseCost(DATABASE_WEIGHTS.memory)
  @Query(() => [String], { description: 'Providers this server launches replicas on, as configured (local, market, static, kubernetes); external (agents join with a token) is always accepted by createDeployment' })
  capacityProviders(@Ctx() context: GraphQLContext): string[] {
    if (!context.operator) workspaceOf(context);
    return [...this.admin.capacity.providers.keys()];
  }

  @Query(() => [GpuOfferType], { description: 'What a provider can rent out now, cheapest first' })
  async gpuOffers(@Arg('provider', { defaultValue: 'market' }) provider: string, @Ctx() context: GraphQLContext): Promise<GpuOfferType[]> {
    if (!context.operator) workspaceOf(context);
    const source = this.admin.capacity.providers.get(provider);
    if (!source) throw new AppError('invalid_request', `provider must be one of ${[...this.admin.capacity.providers.keys()].join(', ')}`, { param: 'provider' });
    return (await source.offers()).sort((left, right) => left.pricePerHour - right.pricePerHour).map(toOffer);
  }

  @DatabaseCost(DATABASE_WEIGHTS.list)
  @Query(() => [StaticHostType], { description: 'Operator: registered static hosts' })
  async staticHosts(@Ctx() context: GraphQLContext): Promise<StaticHostType[]> {
    requireOperator(context);
    return await this.admin.capacity.staticHosts.list();
  }

  @Mutation(() => RegisterStaticHostPayload, { description: 'Operator: registers a machine at a set price; its agent joins with the token shown once' })
  async registerStaticHost(@Arg('input') input: StaticHostInput, @Ctx() context: GraphQLContext): Promise<RegisterStaticHostPayload> {
    requireOperator(context);
    const registered = await this.admin.capacity.staticHosts.register(input);
    this.admin.agentReach.needsRemoteAgents(`static host ${registered.host.name}`);
    return registered;
  }

  @Mutation(() => StaticHostType, { description: 'Operator: removes a host; a replica on it is replaced elsewhere' })
  async removeStaticHost(@Arg('id', () => ID) id: string, @Ctx() context: GraphQLContext): Promise<StaticHostType> {
    requireOperator(context);
    return await this.admin.capacity.staticHosts.remove(id);
  }

  @Mutation(() => [GpuOfferType], { description: 'Operator: replaces the simulated market (scripting a scenario)' })
  async setMarketOffers(@Arg('offers', () => [MarketOfferInput]) offers: MarketOfferInput[], @Ctx() context: GraphQLContext): Promise<GpuOfferType[]> {
    requireOperator(context);
    const market = this.market();
    market.setOffers(offers);
    return (await market.offers()).map(toOffer);
  }

  @Mutation(() => [GpuOfferType], { description: 'Operator: changes one market offer\'s price or machine count' })
  async updateMarketOffer(
    @Arg('id') id: string, @Ctx() context: GraphQLContext,
    @Arg('pricePerHour', () => Float, { nullable: true }) pricePerHour: number | null | undefined,
    @Arg('count', () => Int, { nullable: true }) count: number | null | undefined,
  ): Promise<GpuOfferType[]> {
    requireOperator(context);
    const market = this.market();
    market.updateOffer(id, { ...(pricePerHour != null ? { pricePerHour } : {}), ...(count != null ? { count } : {}) });
    return (await market.offers()).map(toOffer);
  }

  @Mutation(() => [String], { description: 'Operator: the market takes back an offer\'s machines (their replicas are replaced); returns the replica ids' })
  async reclaimMarketOffer(@Arg('id') id: string, @Ctx() context: GraphQLContext): Promise<string[]> {
    requireOperator(context);
    return await this.market().reclaim(id);
  }

  @Mutation(() => DecimalScalar, { description: 'Operator: adds prepaid credit (above 0, at most 1000000, at most 10 decimal places) to a workspace, as a top_up ledger row; returns the new balance. A postpaid workspace becomes prepaid' })
  async addCredit(@Arg('workspaceId', () => ID) workspaceId: string, @Arg('amount', () => DecimalScalar) amount: string, @Ctx() context: GraphQLContext): Promise<string> {
    requireOperator(context);
    return await this.admin.billing.addCredit(workspaceId, amount);
  }

  @Mutation(() => CatalogModelType, { description: 'Operator: adds (or replaces) a catalog model; the spec has the catalog file\'s fields' })
  async registerCatalogModel(@Arg('spec', () => GraphQLJSONObject) spec: Record<string, unknown>, @Ctx() context: GraphQLContext): Promise<CatalogModelType> {
    requireOperator(context);
    const model = await this.admin.catalogAdmin.register(spec);
    return toCatalogModelType(model);
  }

  @Mutation(() => CatalogModelType, { description: 'Operator: a disabled model leaves the catalog for new deployments; existing ones keep serving' })
  async setCatalogModelEnabled(@Arg('id') id: string, @Arg('enabled') enabled: boolean, @Ctx() context: GraphQLContext): Promise<CatalogModelType> {
    requireOperator(context);
    const model = await this.admin.catalogAdmin.setEnabled(id, enabled);
    return toCatalogModelType(model);
  }

  private market() {
    const market = this.admin.capacity.market;
    if (!market) throw new AppError('invalid_request', 'the market provider is not running on this server (LOCAL_AGENTS=false)', { param: 'provider' });
    return market;
  }
}

function toOffer(offer: GpuOffer): GpuOfferType {
  return { ...offer, available: Number.isFinite(offer.available) ? offer.available : null };
}
