import { Arg, Ctx, FieldResolver, ID, Int, Mutation, Query, Resolver, Root } from 'type-graphql';
import type { AdminPort } from '../../../control-plane/api/admin';
import { workspaceOf, type GraphQLContext } from '../graphql-context';
import { RequestLogBodyType, RequestLogEntryType, RequestLogFilterInput, RequestLogPageType } from '../types/request-log.type';
import { DatabaseCost, DATABASE_WEIGHTS } from '../database-cost';

/** The workspace's request log of text calls, and whether it stores bodies (docs/observability-history.md). */
@Resolver(() => RequestLogEntryType)
export class RequestLogResolver {
  constructor(private readonly admin: Pick<AdminPort, 'requestLog'>) {}

  @DatabaseCost(DATABASE_WEIGHTS.list)
  @Query(() => RequestLogPageType, { description: 'Text requests of the workspace, newest first, filtered; `first` 1 to 200, `after` a nextCursor' })
  async requestLog(
    @Ctx() context: GraphQLContext,
    @Arg('filter', () => RequestLogFilterInput, { nullable: true }) filter: RequestLogFilterInput | null,
    @Arg('first', () => Int, { defaultValue: 50 }) first: number,
    @Arg('after', () => String, { nullable: true }) after: string | null,
  ): Promise<RequestLogPageType> {
    return await this.admin.requestLog.page(workspaceOf(context), filter ?? {}, first, after ?? null);
  }

  @Query(() => RequestLogEntryType, { description: 'One request of the log by its id (a request id, or log_<n>); NOT_FOUND outside the workspace' })
  async requestLogEntry(@Arg('id', () => ID) id: string, @Ctx() context: GraphQLContext): Promise<RequestLogEntryType> {
    return await this.admin.requestLog.entry(workspaceOf(context), id);
  }

  @DatabaseCost(DATABASE_WEIGHTS.lookup)
  @FieldResolver(() => RequestLogBodyType, { nullable: true, description: 'The stored request and answer; null unless the workspace stored bodies when it ran' })
  async body(@Root() entry: RequestLogEntryType, @Ctx() context: GraphQLContext): Promise<RequestLogBodyType | null> {
    return entry.hasBody ? await this.admin.requestLog.body(workspaceOf(context), entry.id) : null;
  }

  @Query(() => Boolean, { description: 'Whether the request log stores request and answer bodies of this workspace (off by default)' })
  async requestLogStoresBodies(@Ctx() context: GraphQLContext): Promise<boolean> {
    return await this.admin.requestLog.storesBodies(workspaceOf(context));
  }

  @Mutation(() => Boolean, {
    description: 'Turns storing of request and answer bodies on or off for the workspace\'s requests from now on (bodies keep the log\'s retention); returns the setting',
  })
  async setRequestLogStoresBodies(@Arg('store') store: boolean, @Ctx() context: GraphQLContext): Promise<boolean> {
    return await this.admin.requestLog.setStoresBodies(workspaceOf(context), store);
  }
}
