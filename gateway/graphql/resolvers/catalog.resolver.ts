import { Ctx, Query, Resolver } from 'type-graphql';
import type { ControlPlane } from '../../../control-plane/main';
import { workspaceOf, type GraphQLContext } from '../graphql-context';
import { CatalogModelType, toCatalogModelType } from '../types/catalog-model.type';

@Resolver()
export class CatalogResolver {
  constructor(private readonly controlPlane: ControlPlane) {}

  @Query(() => [CatalogModelType], { description: 'Models deployments can be created from' })
  catalog(@Ctx() context: GraphQLContext): CatalogModelType[] {
    workspaceOf(context);
    return this.controlPlane.catalog.enabledModels.map(toCatalogModelType);
  }
}
