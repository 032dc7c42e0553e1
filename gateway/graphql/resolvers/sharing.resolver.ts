import { Arg, Ctx, ID, Query, Resolver, Root, Subscription } from 'type-graphql';
import { SHARED_MODEL_PREFIX, type SharedModel } from '../../../control-plane/api/inference';
import type { AdminPort } from '../../../control-plane/api/admin';
import { workspaceOf, type GraphQLContext } from '../graphql-context';
import { SharedModelType } from '../types/shared-model.type';
import { DatabaseCost, DATABASE_WEIGHTS } from '../database-cost';
import { servedBySubscriptionHub } from '../subscription-routes';

/** The guest view of shared serving; any workspace's key is a guest. */
@Resolver(() => SharedModelType)
export class SharingResolver {
  constructor(private readonly admin: Pick<AdminPort, 'shared'>) {}

  @DatabaseCost(DATABASE_WEIGHTS.memory)
  @Query(() => [SharedModelType], { description: 'Models of shared serving with prices and availability (GET /shared/v1/models)' })
  sharedModels(@Ctx() context: GraphQLContext): SharedModelType[] {
    workspaceOf(context);
    return this.admin.shared.models().map(toType);
  }

  @DatabaseCost(DATABASE_WEIGHTS.memory)
  @Query(() => SharedModelType, { description: 'One shared model by its id, shared/<model-id>' })
  sharedModel(@Arg('id', () => ID) id: string, @Ctx() context: GraphQLContext): SharedModelType {
    workspaceOf(context);
    return toType(this.admin.shared.model(id, 'id'));
  }

  @Subscription(() => SharedModelType, {
    description: 'Fires when a shared model\'s availability changes (sharing changes of your own deployments come through deploymentUpdated)',
    subscribe: servedBySubscriptionHub,
  })
  sharedModelUpdated(@Root() model: SharedModel): SharedModelType {
    return toType(model);
  }
}

function toType(model: SharedModel): SharedModelType {
  return {
    // An owner's shared adapter is `shared/<adapter id>`; its modelId is its base model.
    id: `${SHARED_MODEL_PREFIX}${model.adapter ? model.adapter.id : model.modelId}`, modelId: model.modelId,
    inputPricePerMillion: model.prices.inputPerMillion, outputPricePerMillion: model.prices.outputPerMillion,
    availability: model.availability, idleGuestSlots: model.idleGuestSlots,
  };
}
