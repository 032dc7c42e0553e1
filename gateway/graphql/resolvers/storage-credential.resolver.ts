import { Arg, Ctx, Int, Mutation, Query, Resolver } from 'type-graphql';
import type { AdminPort, StorageCredential } from '../../../control-plane/api/admin';
import { workspaceOf, type GraphQLContext } from '../graphql-context';
import { CreateStorageCredentialInput, StorageCredentialType } from '../types/storage-credential.type';
import { DatabaseCost, DATABASE_WEIGHTS } from '../database-cost';

/** Customer buckets: saved unverified, usable once a real test write through the credential succeeded. */
@Resolver(() => StorageCredentialType)
export class StorageCredentialResolver {
  constructor(private readonly admin: Pick<AdminPort, 'storageCredentials'>) {}

  @DatabaseCost(DATABASE_WEIGHTS.list)
  @Query(() => [StorageCredentialType], { description: 'Storage credentials of the workspace (deleted ones excluded)' })
  async storageCredentials(@Ctx() context: GraphQLContext): Promise<StorageCredentialType[]> {
    return (await this.admin.storageCredentials.list(workspaceOf(context))).map(toType);
  }

  @Mutation(() => StorageCredentialType, { description: 'Saves a bucket credential (unverified); call verifyStorageCredential next' })
  async createStorageCredential(@Arg('input') input: CreateStorageCredentialInput, @Ctx() context: GraphQLContext): Promise<StorageCredentialType> {
    return toType(await this.admin.storageCredentials.create(workspaceOf(context), input));
  }

  @Mutation(() => StorageCredentialType, { description: 'Writes, reads back and deletes a test object; the result is the status (verified or failed with why)' })
  async verifyStorageCredential(@Arg('id', () => Int) id: number, @Ctx() context: GraphQLContext): Promise<StorageCredentialType> {
    return toType(await this.admin.storageCredentials.verify(workspaceOf(context), id));
  }

  @Mutation(() => StorageCredentialType, { description: 'The id stops working at once; objects already written stay in the bucket' })
  async deleteStorageCredential(@Arg('id', () => Int) id: number, @Ctx() context: GraphQLContext): Promise<StorageCredentialType> {
    return toType(await this.admin.storageCredentials.delete(workspaceOf(context), id));
  }
}

function toType(credential: StorageCredential): StorageCredentialType {
  return credential.toPublic();
}
