import type { Readable } from 'node:stream';

/** What an agent needs to upload one file without holding bucket credentials. */
export interface PresignedUpload {
  url: string;
  method: 'PUT';
  /** Headers the upload must carry exactly (the content type is part of an S3 signature). */
  headers: Record<string, string>;
}

/**
 * Where image/video outputs live: the managed store (local files or the platform's S3 bucket)
 * or a customer's bucket. Keys look like `<workspaceId>/<requestId>/<n>.png` and are checked
 * with `assertObjectKey` by every implementation.
 */
export interface ObjectStore {
  /** The request record's `storage_provider` (docs/api-contract.md#request-records): `local` or `s3`. */
  readonly provider: string;
  /** The request record's `output_bucket`. */
  readonly bucket: string;
  /** Writes the object; `data` may come in parts (a batch's output file, a page at a time), never joined into one buffer. */
  put(key: string, data: Buffer | readonly Buffer[], contentType: string): Promise<void>;
  /**
   * Streams exactly `bytes` bytes of `source` into the object, never holding them whole (a
   * browser's upload of adapter weights). More is refused with `body_too_large` and fewer (the
   * source ended or broke early) with an error; either way no object is left at `key`.
   */
  putSized(key: string, source: Readable, contentType: string, bytes: number): Promise<void>;
  /** The object, or null when there is none. */
  get(key: string): Promise<{ data: Buffer; contentType: string } | null>;
  head(key: string): Promise<{ size: number; contentType: string } | null>;
  /**
   * The object as a stream, read as it is consumed (a download, a batch file being validated):
   * nothing holds it whole. Null when there is none. The caller consumes or destroys the stream.
   */
  open(key: string): Promise<OpenedObject | null>;
  /** Up to `length` bytes from `offset` (fewer at the object's end, none past it); null when there is no object. */
  getRange(key: string, offset: number, length: number): Promise<Buffer | null>;
  /** Idempotent: deleting a missing object succeeds. */
  delete(key: string): Promise<void>;
  presignPut(key: string, contentType: string, expiresInSeconds: number): Promise<PresignedUpload>;
  presignGet(key: string, expiresInSeconds: number): Promise<string>;
  /** Releases pooled connections; a store built for one request (a customer bucket) is closed after it. */
  close?(): void;
}

/** An object opened for streaming; the stream releases its file or connection when it ends or is destroyed. */
export interface OpenedObject {
  stream: Readable;
  size: number;
  contentType: string;
}

/** Content type stored when an upload names none. */
export const DEFAULT_CONTENT_TYPE = 'application/octet-stream';
