/**
 * The records port (docs/layers.md#the-door): what the gateway reads and changes of stored
 * records (media requests, batches and their files, stored and background responses) and the
 * types of those records (and of the stored objects behind their links).
 */
import type { BatchService } from '../batches/batch-service';
import type { FileUploads } from '../batches/file-uploads';
import type { RequestService } from '../requests/request-service';
import type { BackgroundResponses } from '../responses/background-responses';
import type { ResponsesService } from '../responses/responses-service';

/**
 * Stored records, typed down to the calls the gateway makes: `requests` (media requests: get,
 * list, cancel, their output links), `batches` (batches and `batches.files`: the OpenAI Batch and
 * Files APIs), `responses` and `backgroundResponses` (stored responses: retrieve, input items,
 * delete, cancel). Each is the started control plane's own service.
 */
export interface RecordsPort {
  readonly requests: Pick<RequestService, 'get' | 'list' | 'cancel' | 'outputUrls'>;
  readonly batches: BatchService;
  readonly responses: Pick<ResponsesService, 'retrieve' | 'inputItems' | 'delete'>;
  readonly backgroundResponses: Pick<BackgroundResponses, 'cancel' | 'beforeDelete'>;
  /** Signed one-time upload links into the Files API: the gateway verifies a PUT's link and streams its body in. */
  readonly fileUploads: Pick<FileUploads, 'verify' | 'receive'>;
}

export { MAX_LIST_LIMIT as MAX_REQUEST_LIST_LIMIT } from '../requests/request-service';
export { REQUEST_STATUSES } from '../requests/request-record.entity';
export type { RequestRecord, RequestStatus } from '../requests/request-record.entity';
export type { BatchService };
export { BATCH_ENDPOINTS, BATCH_STATUSES } from '../batches/batch.entities';
export type { Batch, BatchFile } from '../batches/batch.entities';
export { JSONL_CONTENT_TYPE, MAX_LIST_LIMIT as MAX_FILE_LIST_LIMIT } from '../batches/batch-files';
export { BatchFileLinks } from '../batches/batch-file-links';
export type { CursorPage } from '../batches/cursor-page';
export type { BackgroundResponses };
export { DEFAULT_CONTENT_TYPE } from '../storage/object-store';
export type { OpenedObject } from '../storage/object-store';
export { assertObjectKey } from '../storage/object-names';
export { LocalObjectStore } from '../storage/local-object-store';
