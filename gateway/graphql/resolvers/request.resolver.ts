import { Arg, Ctx, ID, Int, Query, Resolver, Root, Subscription } from 'type-graphql';
import type { ControlPlane } from '../../../control-plane/main';
import type { RequestRecord } from '../../../control-plane/requests/request-record.entity';
import { workspaceOf, type GraphQLContext } from '../graphql-context';
import { RequestType } from '../types/storage-credential.type';

export const REQUEST_UPDATED = 'REQUEST_UPDATED';

/** Image and video request records of the workspace, for the console. */
@Resolver(() => RequestType)
export class RequestResolver {
  constructor(private readonly controlPlane: ControlPlane) {}

  @Query(() => RequestType)
  async request(@Arg('id', () => ID) id: string, @Ctx() context: GraphQLContext): Promise<RequestType> {
    return toRequestType(await this.controlPlane.requests.get(workspaceOf(context), id));
  }

  @Query(() => [RequestType], { description: "A deployment's requests, newest first" })
  async requests(
    @Arg('deploymentId', () => ID) deploymentId: string,
    @Arg('status', () => String, { nullable: true }) status: string | null,
    @Arg('limit', () => Int, { defaultValue: 50 }) limit: number,
    @Ctx() context: GraphQLContext,
  ): Promise<RequestType[]> {
    await this.controlPlane.deployments.get(workspaceOf(context), deploymentId);
    return (await this.controlPlane.requests.list(deploymentId, { status: status ?? undefined }, limit)).map(toRequestType);
  }

  @Subscription(() => RequestType, {
    topics: REQUEST_UPDATED,
    description: 'Fires when a request of the workspace changes status or progress (on the server running it)',
    filter: ({ payload, context }: { payload: RequestRecord; context: GraphQLContext }) => payload.workspaceId === workspaceOf(context),
  })
  requestUpdated(@Root() record: RequestRecord): RequestType {
    return toRequestType(record);
  }
}

export function toRequestType(record: RequestRecord): RequestType {
  const { id, deploymentId, modality, status, progress, outputObjectKey, outputBucket, storageProvider, errorCode, errorMessage, billedGpuSeconds, queuedAt, startedAt, completedAt } = record;
  return { id, deploymentId, modality, status, progress, outputObjectKey, outputBucket, storageProvider, errorCode, errorMessage, billedGpuSeconds, queuedAt, startedAt, completedAt };
}
