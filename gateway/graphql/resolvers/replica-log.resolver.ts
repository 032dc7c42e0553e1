import { Arg, Ctx, ID, Int, Query, Resolver, Root, Subscription } from 'type-graphql';
import type { AdminPort, ReplicaLogLine } from '../../../control-plane/api/admin';
import { AppError } from '../../../control-plane/api/errors';
import { workspaceOf, type GraphQLContext } from '../graphql-context';
import { DatabaseCost, DATABASE_WEIGHTS } from '../database-cost';
import { servedBySubscriptionHub } from '../subscription-routes';
import { ReplicaLogLineType } from '../types/replica-log.type';
import type { DeploymentResolver } from './deployment.resolver';

const MAX_LINES = 500;

/** The recent lines of a deployment's replicas (agent and engine), and the stream of new ones. */
@Resolver()
export class ReplicaLogResolver {
  constructor(private readonly admin: Pick<AdminPort, 'replicaLogs'>, private readonly deployments: Pick<DeploymentResolver, 'checkOwnDeployment'>) {}

  @DatabaseCost(DATABASE_WEIGHTS.lookup)
  @Query(() => [ReplicaLogLineType], {
    description: 'The newest lines (oldest first) of the deployment\'s replicas, or of one of them; limit 1 to 500. Kept in memory by every server '
      + 'since it started: a few hundred lines per replica',
  })
  async replicaLogs(
    @Arg('deploymentId', () => ID) deploymentId: string, @Ctx() context: GraphQLContext,
    @Arg('replicaId', () => ID, { nullable: true }) replicaId: string | null | undefined,
    @Arg('limit', () => Int, { defaultValue: 200 }) limit: number,
  ): Promise<ReplicaLogLineType[]> {
    if (!Number.isInteger(limit) || limit < 1 || limit > MAX_LINES) throw new AppError('invalid_request', `limit must be an integer from 1 to ${MAX_LINES}`, { param: 'limit' });
    await this.deployments.checkOwnDeployment(context, deploymentId);
    return this.admin.replicaLogs.recent(workspaceOf(context), deploymentId, { replicaId, limit });
  }

  @Subscription(() => ReplicaLogLineType, {
    description: 'Every new line of the deployment\'s replicas\' agents and engines, from whichever server holds each agent',
    subscribe: servedBySubscriptionHub,
  })
  replicaLogLine(@Root() line: ReplicaLogLine, @Arg('deploymentId', () => ID) _deploymentId: string): ReplicaLogLineType {
    return line;
  }
}
