import { Arg, Ctx, Int, Query, Resolver } from 'type-graphql';
import type { AdminPort, CostGrouping, UsageGrouping } from '../../../control-plane/api/admin';
import { AppError } from '../../../control-plane/api/errors';
import { workspaceOf, type GraphQLContext } from '../graphql-context';
import { CostRowType, UsageRowType } from '../types/capacity.type';
import { DecimalScalar } from '../types/decimal.scalar';
import { EarningsGrouping, LedgerEntryType, SharingEarningsRowType } from '../types/ledger.type';
import { DatabaseCost, DATABASE_WEIGHTS } from '../database-cost';

/** GPU cost, token usage, ledger rows, sharing earnings and prepaid credit of the caller's workspace. */
@Resolver()
export class BillingResolver {
  constructor(private readonly admin: Pick<AdminPort, 'billing'>) {}

  @DatabaseCost(DATABASE_WEIGHTS.aggregate)
  @Query(() => [CostRowType], { description: 'GPU-hours and cost between from (inclusive) and to, by day (UTC), deployment or replica' })
  async costs(
    @Arg('from') from: Date, @Arg('to') to: Date, @Arg('groupBy', { defaultValue: 'day' }) groupBy: string, @Ctx() context: GraphQLContext,
  ): Promise<CostRowType[]> {
    return await this.admin.billing.costs(workspaceOf(context), from, to, oneOf(groupBy, ['day', 'deployment', 'replica'] as const));
  }

  @DatabaseCost(DATABASE_WEIGHTS.aggregate)
  @Query(() => [UsageRowType], { description: 'Text requests and tokens between from and to, by day (UTC), deployment, api_key or adapter (a LoRA adapter; key "" is the base model)' })
  async usage(
    @Arg('from') from: Date, @Arg('to') to: Date, @Arg('groupBy', { defaultValue: 'day' }) groupBy: string, @Ctx() context: GraphQLContext,
  ): Promise<UsageRowType[]> {
    return await this.admin.billing.usage(workspaceOf(context), from, to, oneOf(groupBy, ['day', 'deployment', 'api_key', 'adapter'] as const));
  }

  @Query(() => DecimalScalar, { nullable: true, description: 'Prepaid credit left; null when the workspace is postpaid (no limit)' })
  async creditBalance(@Ctx() context: GraphQLContext): Promise<string | null> {
    return await this.admin.billing.creditBalance(workspaceOf(context));
  }

  @DatabaseCost(DATABASE_WEIGHTS.range)
  @Query(() => [LedgerEntryType], { description: 'Movements of the workspace\'s money created between from (inclusive) and to, newest first; kind filters, limit 1 to 200' })
  async ledgerEntries(
    @Arg('from') from: Date, @Arg('to') to: Date, @Ctx() context: GraphQLContext,
    @Arg('kind', () => String, { nullable: true }) kind: string | null | undefined,
    @Arg('limit', () => Int, { defaultValue: 50 }) limit: number,
  ): Promise<LedgerEntryType[]> {
    return await this.admin.billing.ledgerEntries(workspaceOf(context), { from, to, kind, limit });
  }

  @DatabaseCost(DATABASE_WEIGHTS.aggregate)
  @Query(() => [SharingEarningsRowType], { description: 'What guests paid for the workspace\'s shared deployments between from and to, by day (UTC) or deployment' })
  async sharingEarnings(
    @Arg('from') from: Date, @Arg('to') to: Date, @Ctx() context: GraphQLContext,
    @Arg('groupBy', () => EarningsGrouping, { defaultValue: EarningsGrouping.DAY }) groupBy: EarningsGrouping,
  ): Promise<SharingEarningsRowType[]> {
    return await this.admin.billing.sharingEarnings(workspaceOf(context), from, to, groupBy);
  }
}

function oneOf<T extends CostGrouping | UsageGrouping>(value: string, allowed: readonly T[]): T {
  if (!allowed.includes(value as T)) throw new AppError('invalid_request', `groupBy must be one of ${allowed.join(', ')}`, { param: 'groupBy' });
  return value as T;
}
