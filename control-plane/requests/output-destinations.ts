import type { ObjectStore } from '../storage/object-store';
import type { StorageCredentialService } from '../storage/storage-credential.service';
import type { RequestRecord } from './request-record.entity';

export interface OutputDestinationOptions {
  /** docs/api-contract.md: Managed links about 1 h. @default 3600 */
  managedLinkTtlSeconds: number;
  /** docs/api-contract.md: customer-bucket links about 7 days (S3's presigning maximum). @default 604800 */
  customerLinkTtlSeconds: number;
}

/** Where one request's files go, and how long links to them live. */
export interface OutputDestination {
  readonly store: ObjectStore;
  readonly managed: boolean;
  readonly linkTtlSeconds: number;
  /** Key of output `index` (and of inputs, which always live in managed storage). */
  keyFor(index: number, extension: string): string;
  release(): void;
}

/**
 * The destination table of docs/api-contract.md#output-destinations: Managed by default (links ~1 h, objects removed by retention),
 * or a customer's bucket chosen per request (`storage_credential_id`) or as the deployment's
 * default (links ~7 days, objects kept). Managed keys are namespaced by workspace; a
 * customer bucket holds only that customer's objects, under its own prefix.
 */
export class OutputDestinations {
  constructor(
    readonly managed: ObjectStore,
    private readonly credentials: StorageCredentialService,
    private readonly options: OutputDestinationOptions,
  ) {}

  /** Refuses (422) an unknown or unverified credential before a request is accepted. */
  async check(workspaceId: string, storageCredentialId: number | null): Promise<void> {
    if (storageCredentialId === null) return;
    const store = await this.credentials.storeFor(workspaceId, storageCredentialId);
    store.close?.();
  }

  async forRecord(record: Pick<RequestRecord, 'id' | 'workspaceId' | 'storageCredentialId'>): Promise<OutputDestination> {
    if (record.storageCredentialId === null) {
      return {
        store: this.managed, managed: true, linkTtlSeconds: this.options.managedLinkTtlSeconds,
        keyFor: (index, extension) => `${record.workspaceId}/${record.id}/${index}.${extension}`,
        release: () => {},
      };
    }
    const store = await this.credentials.storeFor(record.workspaceId, record.storageCredentialId);
    return {
      store, managed: false, linkTtlSeconds: this.options.customerLinkTtlSeconds,
      keyFor: (index, extension) => `${record.id}/${index}.${extension}`,
      release: () => store.close?.(),
    };
  }

  /** Inputs (edit image, mask, video reference) always live in managed storage, deleted when the job ends. */
  inputKey(record: Pick<RequestRecord, 'id' | 'workspaceId'>, name: string): string {
    return `${record.workspaceId}/${record.id}/inputs/${name}`;
  }
}
