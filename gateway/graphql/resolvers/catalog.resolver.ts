import { Ctx, Query, Resolver } from 'type-graphql';
import type { AdminPort } from '../../../control-plane/api/admin';
import { workspaceOf, type GraphQLContext } from '../graphql-context';
import { CatalogModelType, toCatalogModelType } from '../types/catalog-model.type';
import { DatabaseCost, DATABASE_WEIGHTS } from '../database-cost';

@Resolver()
export class CatalogResolver {
  constructor(private readonly admin: Pick<AdminPort, 'catalog'>) {}

  @DatabaseCost(DATABASE_WEIGHTS.memory)
  @Query(() => [CatalogModelType], { description: 'Models deployments can be created from' })
  catalog(@Ctx() context: GraphQLContext): CatalogModelType[] {
    workspaceOf(context);
    return this.admin.catalog.enabledModels.map(toCatalogModelType);
  }
}
