import path from 'node:path';
import { LocalObjectStore } from './local-object-store';
import type { ObjectStore } from './object-store';
import { S3ObjectStore } from './s3-object-store';
import type { StorageConfig } from './storage-config';

/** The platform's own output store ("Managed" in docs/api-contract.md#output-destinations), built from configuration at boot. */
export function createManagedObjectStore(
  config: StorageConfig,
  options: { dataDir: string; publicUrl: () => string; signingKey: Buffer },
): ObjectStore {
  if (config.storageProvider === 'local') {
    return new LocalObjectStore({
      rootDir: path.join(options.dataDir, 'objects'), bucket: config.outputBucket,
      publicUrl: options.publicUrl, signingKey: options.signingKey,
    });
  }
  return new S3ObjectStore({
    endpoint: config.s3Endpoint, region: config.s3Region, bucket: config.outputBucket,
    accessKeyId: config.s3AccessKeyId!, secretAccessKey: config.s3SecretAccessKey!,
    forcePathStyle: config.s3ForcePathStyle, keyPrefix: config.s3KeyPrefix,
  });
}
