import { randomBytes } from 'node:crypto';
import type { DataSource } from 'typeorm';
import { openDatabase } from '../../control-plane/data-source';
import type { StorageCredentialInput } from '../../control-plane/storage/storage-credential-input';
import { StorageCredentialService } from '../../control-plane/storage/storage-credential.service';
import { WorkspaceService } from '../../control-plane/workspaces/workspace.service';
import { createTestDatabase, dropTestDatabase } from '../support/test-database';
import { S3RVER_ACCESS_KEY_ID, S3RVER_SECRET_ACCESS_KEY, startS3rver, type TestS3 } from './start-s3rver';

export const CUSTOMER_BUCKET = 'customer-outputs';

/** A fresh migrated database, a real s3rver, and the service over both. */
export interface CredentialFixture {
  readonly dataSource: DataSource;
  readonly s3: TestS3;
  readonly service: StorageCredentialService;
  readonly encryptionKey: Buffer;
  /** s3rver checks the key id but not SigV4 signatures, so this secret is sent yet never checked. */
  readonly secret: string;
  newWorkspace(): Promise<string>;
  input(overrides?: Partial<Record<keyof StorageCredentialInput, unknown>>): StorageCredentialInput;
  stop(): Promise<void>;
}

export async function startCredentialFixture(): Promise<CredentialFixture> {
  const databaseUrl = await createTestDatabase();
  const dataSource = await openDatabase(databaseUrl);
  const s3 = await startS3rver([CUSTOMER_BUCKET]);
  const encryptionKey = randomBytes(32);
  const secret = `${S3RVER_SECRET_ACCESS_KEY}-plaintext-secret-${randomBytes(4).toString('hex')}`;
  const workspaces = new WorkspaceService(dataSource);
  return {
    dataSource, s3, encryptionKey, secret,
    service: new StorageCredentialService(dataSource, { encryptionKey, allowPrivateEndpoints: true }),
    newWorkspace: async () => (await workspaces.create(`storage ${randomBytes(3).toString('hex')}`)).id,
    input: (overrides = {}) => ({
      name: 'my bucket', endpoint: s3.endpoint, region: 'us-east-1', bucket: CUSTOMER_BUCKET, keyPrefix: 'renders',
      accessKeyId: S3RVER_ACCESS_KEY_ID, secretAccessKey: secret, ...overrides,
    } as StorageCredentialInput),
    async stop() {
      await s3.stop();
      await dataSource.destroy();
      await dropTestDatabase(databaseUrl);
    },
  };
}
