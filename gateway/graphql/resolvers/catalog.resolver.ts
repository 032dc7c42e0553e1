import { Ctx, Query, Resolver } from 'type-graphql';
import type { ControlPlane } from '../../../control-plane/api/startup';
import { workspaceOf, type GraphQLContext } from '../graphql-context';
import { CatalogModelType, toCatalogModelType } from '../types/catalog-model.type';
import { DatabaseCost, DATABASE_WEIGHTS } from '../database-cost';

@Resolver()
export class CatalogResolver {
  constructor(private readonly controlPlane: ControlPlane) {}

  @DatabaseCost(DATABASE_WEIGHTS.memory)
  @Query(() => [CatalogModelType], { description: 'Models deployments can be created from' })
  catalog(@Ctx() context: GraphQLContext): CatalogModelType[] {
    workspaceOf(context);
    return this.controlPlane.catalog.enabledModels.map(toCatalogModelType);
  }
}
