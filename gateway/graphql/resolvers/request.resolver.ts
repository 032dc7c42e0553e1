import { Arg, Ctx, FieldResolver, ID, Int, Mutation, Query, Resolver, Root, Subscription } from 'type-graphql';
import { AppError } from '../../../control-plane/api/errors';
import type { RequestRecord } from '../../../control-plane/api/records';
import type { AdminPort } from '../../../control-plane/api/admin';
import { workspaceOf, type GraphQLContext } from '../graphql-context';
import { RequestType } from '../types/storage-credential.type';
import { DatabaseCost, DATABASE_WEIGHTS } from '../database-cost';
import { servedBySubscriptionHub } from '../subscription-routes';

/** Image and video request records of the workspace, for the console. */
@Resolver(() => RequestType)
export class RequestResolver {
  constructor(private readonly admin: Pick<AdminPort, 'deployments' | 'requests'>) {}

  @Query(() => RequestType)
  async request(@Arg('id', () => ID) id: string, @Ctx() context: GraphQLContext): Promise<RequestType> {
    return toRequestType(await this.admin.requests.get(workspaceOf(context), id));
  }

  @DatabaseCost(DATABASE_WEIGHTS.list)
  @Query(() => [RequestType], { description: "A deployment's requests, newest first" })
  async requests(
    @Arg('deploymentId', () => ID) deploymentId: string,
    @Arg('status', () => String, { nullable: true }) status: string | null,
    @Arg('limit', () => Int, { defaultValue: 50 }) limit: number,
    @Ctx() context: GraphQLContext,
  ): Promise<RequestType[]> {
    await this.admin.deployments.get(workspaceOf(context), deploymentId);
    return (await this.admin.requests.list(deploymentId, { status: status ?? undefined }, limit)).map(toRequestType);
  }

  @DatabaseCost(DATABASE_WEIGHTS.lookup)
  @FieldResolver(() => [String], {
    nullable: true,
    description: 'Links to the outputs of a succeeded request, signed anew at each read (as GET /v1/requests/{id} output_urls); null before success or once retention removed them',
  })
  async outputUrls(@Root() request: RequestType, @Ctx() context: GraphQLContext): Promise<string[] | null> {
    if (request.status !== 'succeeded') return null;
    const requests = this.admin.requests;
    return await requests.outputUrls(await requests.get(workspaceOf(context), request.id));
  }

  @Mutation(() => RequestType, { description: 'Cancels a queued request, as POST /v1/requests/{id}/cancel; CONFLICT once it runs or has ended' })
  async cancelRequest(@Arg('id', () => ID) id: string, @Ctx() context: GraphQLContext): Promise<RequestType> {
    const { record, canceled } = await this.admin.requests.cancel(workspaceOf(context), id);
    if (!canceled) throw new AppError('request_not_cancellable', `request ${id} is ${record.status}; only queued requests can be canceled`, { param: 'id' });
    return toRequestType(record);
  }

  @Subscription(() => RequestType, {
    description: 'Fires when a request of the workspace changes status or progress (on the server running it)',
    subscribe: servedBySubscriptionHub,
  })
  requestUpdated(@Root() record: RequestRecord): RequestType {
    return toRequestType(record);
  }
}

export function toRequestType(record: RequestRecord): RequestType {
  const { id, deploymentId, modality, status, progress, outputObjectKey, outputBucket, storageProvider, errorCode, errorMessage, billedGpuSeconds, queuedAt, startedAt, completedAt } = record;
  return { id, deploymentId, modality, status, progress, outputObjectKey, outputBucket, storageProvider, errorCode, errorMessage, billedGpuSeconds, queuedAt, startedAt, completedAt };
}
