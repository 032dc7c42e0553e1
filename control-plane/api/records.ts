/**
 * The records port (docs/layers.md#the-door): what the gateway reads and changes of stored
 * records (media requests, batches and their files, background responses, stored objects) and
 * the types of those records.
 */
import type { ControlPlane } from '../main';

/**
 * Stored records: `requests` (media requests: get, list, cancel), `batches` (batches and
 * `batches.files`), `responses` and `backgroundResponses` (stored responses: get, cancel,
 * delete), `managedStore` and `storageCredentials` (where outputs and files are kept, for their
 * links).
 */
export type RecordsPort = Pick<ControlPlane,
  'requests' | 'batches' | 'responses' | 'backgroundResponses' | 'managedStore' | 'storageCredentials'>;

export { MAX_LIST_LIMIT as MAX_REQUEST_LIST_LIMIT } from '../requests/request-service';
export { REQUEST_STATUSES } from '../requests/request-record.entity';
export type { RequestRecord, RequestStatus } from '../requests/request-record.entity';
export type { BatchService } from '../batches/batch-service';
export { BATCH_ENDPOINTS, BATCH_STATUSES } from '../batches/batch.entities';
export type { Batch, BatchFile } from '../batches/batch.entities';
export { JSONL_CONTENT_TYPE, MAX_LIST_LIMIT as MAX_FILE_LIST_LIMIT } from '../batches/batch-files';
export { BatchFileLinks } from '../batches/batch-file-links';
export type { CursorPage } from '../batches/cursor-page';
export type { BackgroundResponses } from '../responses/background-responses';
export { DEFAULT_CONTENT_TYPE } from '../storage/object-store';
export type { OpenedObject } from '../storage/object-store';
export { assertObjectKey } from '../storage/object-names';
export { LocalObjectStore } from '../storage/local-object-store';
