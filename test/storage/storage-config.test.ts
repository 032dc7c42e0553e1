import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { LocalObjectStore } from '../../control-plane/storage/local-object-store';
import { createManagedObjectStore } from '../../control-plane/storage/managed-object-store';
import { S3ObjectStore } from '../../control-plane/storage/s3-object-store';
import { loadStorageConfig } from '../../control-plane/storage/storage-config';
import { resolveServerKey } from '../../control-plane/server-keys';

describe('storage configuration', () => {
  let dataDir: string;

  beforeEach(() => {
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'inference-storage-config-'));
  });

  afterEach(() => {
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  it('defaults to local files in the outputs bucket with the contract\'s link lifetimes', () => {
    expect(loadStorageConfig({})).toMatchObject({
      storageProvider: 'local', outputBucket: 'outputs', s3Region: 'us-east-1', s3ForcePathStyle: false, s3KeyPrefix: '',
      outputUrlTtlSeconds: 3600, customerOutputUrlTtlSeconds: 604800, maxUploadBytes: 536870912,
    });
  });

  it('names the env variable at fault', () => {
    expect(() => loadStorageConfig({ STORAGE_PROVIDER: 's3' })).toThrow('STORAGE_PROVIDER=s3 needs S3_ACCESS_KEY_ID and S3_SECRET_ACCESS_KEY');
    expect(() => loadStorageConfig({ OUTPUT_BUCKET: 'Not_A_Bucket' })).toThrow('OUTPUT_BUCKET');
    expect(() => loadStorageConfig({ S3_KEY_PREFIX: '../up' })).toThrow('S3_KEY_PREFIX');
    expect(() => loadStorageConfig({ CUSTOMER_OUTPUT_URL_TTL_SECONDS: '700000' })).toThrow('CUSTOMER_OUTPUT_URL_TTL_SECONDS');
    expect(loadStorageConfig({ S3_KEY_PREFIX: 'managed' }).s3KeyPrefix).toBe('managed/');
  });

  it('takes keys from env as hex or base64, else creates one file per key and reuses it', () => {
    const key = randomBytes(32);
    expect(resolveServerKey(key.toString('hex'), 'STORAGE_SIGNING_KEY', dataDir, 'storage-signing.key').equals(key)).toBe(true);
    expect(resolveServerKey(key.toString('base64'), 'STORAGE_SIGNING_KEY', dataDir, 'storage-signing.key').equals(key)).toBe(true);
    expect(() => resolveServerKey('too-short', 'STORAGE_SIGNING_KEY', dataDir, 'storage-signing.key')).toThrow('STORAGE_SIGNING_KEY must be 32 bytes');
    expect(fs.existsSync(path.join(dataDir, 'storage-signing.key'))).toBe(false);

    const created = resolveServerKey(undefined, 'SECRETS_ENCRYPTION_KEY', dataDir, 'secrets-encryption.key');
    const file = path.join(dataDir, 'secrets-encryption.key');
    expect(created.length).toBe(32);
    expect(fs.statSync(file).mode & 0o777).toBe(0o600);
    expect(resolveServerKey(undefined, 'SECRETS_ENCRYPTION_KEY', dataDir, 'secrets-encryption.key').equals(created)).toBe(true);
  });

  it('builds the managed store the provider names', () => {
    const options = { dataDir, publicUrl: () => 'http://localhost:8080', signingKey: randomBytes(32) };
    const local = createManagedObjectStore(loadStorageConfig({}), options);
    expect(local).toBeInstanceOf(LocalObjectStore);
    expect([local.provider, local.bucket]).toEqual(['local', 'outputs']);
    const s3 = createManagedObjectStore(loadStorageConfig({
      STORAGE_PROVIDER: 's3', OUTPUT_BUCKET: 'platform-outputs', S3_ACCESS_KEY_ID: 'id', S3_SECRET_ACCESS_KEY: 'secret',
    }), options);
    expect(s3).toBeInstanceOf(S3ObjectStore);
    expect([s3.provider, s3.bucket]).toEqual(['s3', 'platform-outputs']);
    s3.close?.();
  });
});
