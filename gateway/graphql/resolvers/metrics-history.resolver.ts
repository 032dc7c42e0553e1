import { Arg, Ctx, ID, Int, Query, Resolver } from 'type-graphql';
import type { AdminPort } from '../../../control-plane/api/admin';
import { workspaceOf, type GraphQLContext } from '../graphql-context';
import { DeploymentMetricsPointType } from '../types/metrics-history.type';
import { DatabaseCost, DATABASE_WEIGHTS } from '../database-cost';

/** A deployment's per-minute history (docs/observability-history.md). */
@Resolver()
export class MetricsHistoryResolver {
  constructor(private readonly admin: Pick<AdminPort, 'metricsHistory'>) {}

  @DatabaseCost(DATABASE_WEIGHTS.aggregate)
  @Query(() => [DeploymentMetricsPointType], {
    description: 'A deployment\'s history from `from` to `to` in steps of stepMinutes (1 to 1440; at most 1500 points), every step present, oldest first',
  })
  async deploymentMetrics(
    @Arg('deploymentId', () => ID) deploymentId: string, @Arg('from') from: Date, @Arg('to') to: Date,
    @Arg('stepMinutes', () => Int, { defaultValue: 1 }) stepMinutes: number, @Ctx() context: GraphQLContext,
  ): Promise<DeploymentMetricsPointType[]> {
    return await this.admin.metricsHistory.points(workspaceOf(context), deploymentId, { from, to, stepMinutes });
  }
}
