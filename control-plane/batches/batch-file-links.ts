import type { Logger } from 'pino';
import type { ObjectStore } from '../storage/object-store';
import type { StorageCredentialService } from '../storage/storage-credential.service';
import type { BatchFile } from './batch.entities';
import type { BatchFiles } from './batch-files';

export interface BatchFileLinkOptions {
  /** As the links to media outputs in managed storage (OUTPUT_URL_TTL_SECONDS, about 1 h). */
  managedLinkTtlSeconds: number;
  /** As the links to outputs in a customer's bucket (CUSTOMER_OUTPUT_URL_TTL_SECONDS, about 7 days: S3's presigning maximum). */
  customerLinkTtlSeconds: number;
}

/**
 * Signed, expiring download links to a batch's files, for the console: a browser following a
 * plain link cannot send the key's bearer header that `GET {baseUrl}/files/{id}/content` asks
 * for, so the link itself carries the authorization, as media outputs' links do. Signed anew at
 * each read; the file is looked up in the caller's workspace, so a link is only ever made for
 * the caller's own file.
 */
export class BatchFileLinks {
  constructor(
    private readonly files: Pick<BatchFiles, 'find'>,
    private readonly managed: ObjectStore,
    private readonly credentials: Pick<StorageCredentialService, 'storeFor'>,
    private readonly options: BatchFileLinkOptions,
    private readonly logger: Logger,
  ) {}

  /** A GET link to the file, or null when there is no such file of the workspace (deleted, never written) or its bucket cannot sign now. */
  async downloadUrl(workspaceId: string, fileId: string | null): Promise<string | null> {
    if (!fileId) return null;
    const file = await this.files.find(workspaceId, undefined, fileId);
    return file ? await this.sign(file) : null;
  }

  private async sign(file: BatchFile): Promise<string | null> {
    if (file.storageCredentialId === null) return await this.managed.presignGet(file.objectKey, this.options.managedLinkTtlSeconds);
    // A customer's bucket whose credential was deleted or stopped verifying: no link, rather than failing the whole batch read.
    const store = await this.credentials.storeFor(file.workspaceId, file.storageCredentialId).catch((error: unknown) => {
      this.logger.warn({ err: error, fileId: file.id }, 'cannot sign a link to a batch file');
      return null;
    });
    if (!store) return null;
    try {
      return await store.presignGet(file.objectKey, this.options.customerLinkTtlSeconds);
    } finally {
      store.close?.();
    }
  }
}
