import { Arg, Ctx, FieldResolver, ID, Int, Mutation, Query, Resolver, Root, Subscription } from 'type-graphql';
import { AppError } from '../../../control-plane/api/errors';
import type { Batch, BatchFileLinks } from '../../../control-plane/api/records';
import type { AdminPort } from '../../../control-plane/api/admin';
import { workspaceOf, type GraphQLContext } from '../graphql-context';
import { BatchType } from '../types/batch.type';
import { DatabaseCost, DATABASE_WEIGHTS } from '../database-cost';
import { servedBySubscriptionHub } from '../subscription-routes';

const LINK_NOTE = 'signed anew at each read (about 1 h in managed storage, about 7 days in the deployment\'s own bucket), so a browser can download it without the API key';

/**
 * Batches of the OpenAI Batch API (created with `POST {baseUrl}/batches`), for the console:
 * list, read, cancel, follow live, and download their files through signed links. A batch of
 * another workspace is NOT_FOUND, as `GET /batches/{id}` answers 404 for it; a deployment id
 * answers as `deployment(id:)` does.
 */
@Resolver(() => BatchType)
export class BatchResolver {
  constructor(private readonly admin: Pick<AdminPort, 'batches' | 'deployments'>, private readonly links: BatchFileLinks) {}

  @DatabaseCost(DATABASE_WEIGHTS.list)
  @Query(() => [BatchType], {
    description: 'Batches of the workspace, or of one deployment, newest first; the next page starts after the last id seen (`after`)',
  })
  async batches(
    // Left out of the operation, a nullable argument is undefined rather than null.
    @Arg('deploymentId', () => ID, { nullable: true }) deploymentId: string | null | undefined,
    @Arg('after', () => ID, { nullable: true, description: 'The id of the last batch of the previous page' }) after: string | null | undefined,
    @Arg('limit', () => Int, { defaultValue: 20, description: '1 to 100' }) limit: number,
    @Ctx() context: GraphQLContext,
  ): Promise<BatchType[]> {
    const workspaceId = workspaceOf(context);
    if (deploymentId !== null && deploymentId !== undefined) await this.ownDeployment(workspaceId, deploymentId);
    const page = await this.admin.batches.list(workspaceId, { deploymentId: deploymentId ?? undefined, after: after ?? undefined, limit });
    return page.data.map(toBatchType);
  }

  @Query(() => BatchType)
  async batch(@Arg('id', () => ID) id: string, @Ctx() context: GraphQLContext): Promise<BatchType> {
    return toBatchType(await this.admin.batches.get(workspaceOf(context), id));
  }

  @Mutation(() => BatchType, {
    description: 'As POST {baseUrl}/batches/{id}/cancel: no line starts from now on; the batch is cancelling until its running lines end, then cancelled with its files. CONFLICT once it has ended',
  })
  async cancelBatch(@Arg('id', () => ID) id: string, @Ctx() context: GraphQLContext): Promise<BatchType> {
    return toBatchType(await this.admin.batches.cancel(workspaceOf(context), id));
  }

  @DatabaseCost(DATABASE_WEIGHTS.lookup)
  @FieldResolver(() => String, { nullable: true, description: `A link to the input file, ${LINK_NOTE}; null once the file was deleted` })
  async inputFileUrl(@Root() batch: BatchType, @Ctx() context: GraphQLContext): Promise<string | null> {
    return await this.links.downloadUrl(workspaceOf(context), batch.inputFileId);
  }

  @DatabaseCost(DATABASE_WEIGHTS.lookup)
  @FieldResolver(() => String, { nullable: true, description: `A link to the output file, ${LINK_NOTE}; null until the batch ends with one` })
  async outputFileUrl(@Root() batch: BatchType, @Ctx() context: GraphQLContext): Promise<string | null> {
    return await this.links.downloadUrl(workspaceOf(context), batch.outputFileId);
  }

  @DatabaseCost(DATABASE_WEIGHTS.lookup)
  @FieldResolver(() => String, { nullable: true, description: `A link to the error file, ${LINK_NOTE}; null until the batch ends with one` })
  async errorFileUrl(@Root() batch: BatchType, @Ctx() context: GraphQLContext): Promise<string | null> {
    return await this.links.downloadUrl(workspaceOf(context), batch.errorFileId);
  }

  @Subscription(() => BatchType, {
    description: 'Fires when a batch of the workspace (of one deployment, when given) is created, changes status, or its request counts move (at most about twice a second per batch)',
    subscribe: servedBySubscriptionHub,
  })
  batchUpdated(@Root() batch: Batch, @Arg('deploymentId', () => ID, { nullable: true }) _deploymentId: string | null): BatchType {
    return toBatchType(batch);
  }

  /**
   * Run when a `batchUpdated` subscription starts (subscription-routes.ts): another
   * workspace's deployment is refused as `batches(deploymentId:)` refuses it, rather than a
   * subscription that is accepted and silently never fires.
   */
  async checkBatchUpdatedSubscription(context: GraphQLContext, deploymentId: string | null | undefined): Promise<void> {
    const workspaceId = workspaceOf(context);
    if (deploymentId !== null && deploymentId !== undefined) await this.ownDeployment(workspaceId, deploymentId);
  }

  /** The deployment's refusal (FORBIDDEN for another workspace's, NOT_FOUND for none), naming this operation's argument. */
  private async ownDeployment(workspaceId: string, deploymentId: string): Promise<void> {
    try {
      await this.admin.deployments.get(workspaceId, deploymentId);
    } catch (error) {
      if (error instanceof AppError && error.param === 'id') throw new AppError(error.code, error.message, { param: 'deploymentId', cause: error });
      throw error;
    }
  }
}

export function toBatchType(batch: Batch): BatchType {
  const {
    id, deploymentId, endpoint, model, status, completionWindow, inputFileId, outputFileId, errorFileId, errors, metadata,
    createdAt, expiresAt, inProgressAt, finalizingAt, completedAt, failedAt, expiredAt, cancellingAt, cancelledAt,
  } = batch;
  return {
    id, deploymentId, endpoint, model, status, completionWindow, inputFileId, outputFileId, errorFileId,
    requestCounts: { total: batch.totalCount, completed: batch.completedCount, failed: batch.failedCount },
    usage: { inputTokens: batch.inputTokens, cachedTokens: batch.cachedTokens, outputTokens: batch.outputTokens, totalTokens: batch.totalTokens },
    errors: errors?.map(({ code, message, param, line }) => ({ code, message, param, line })) ?? null,
    metadata, createdAt, expiresAt, inProgressAt, finalizingAt, completedAt, failedAt, expiredAt, cancellingAt, cancelledAt,
  };
}
