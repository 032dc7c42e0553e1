import {
  DeleteObjectCommand, GetObjectCommand, HeadObjectCommand, PutObjectCommand, S3Client, S3ServiceException,
} from '@aws-sdk/client-s3';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import { pipeline, Readable, Transform } from 'node:stream';
import { AppError } from '../errors/app-error';
import { assertObjectKey } from './object-names';
import { DEFAULT_CONTENT_TYPE, type ObjectStore, type OpenedObject, type PresignedUpload } from './object-store';

export interface S3ObjectStoreOptions {
  /** An S3-compatible endpoint (MinIO, R2, s3rver…); unset means AWS S3 for `region`. */
  endpoint?: string;
  region: string;
  bucket: string;
  accessKeyId: string;
  secretAccessKey: string;
  /** `<endpoint>/<bucket>/<key>` instead of `<bucket>.<endpoint>/<key>`; most non-AWS stores need it. @default false */
  forcePathStyle?: boolean;
  /** Prepended to every key (`outputs/`); a customer may confine us to part of their bucket. @default '' */
  keyPrefix?: string;
  /** Attempts per call, the first included. @default 3 */
  maxAttempts?: number;
  /** Budget of one HTTP attempt. @default 30000 */
  requestTimeoutMs?: number;
}

/** SigV4 presigned URLs cannot outlive 7 days. */
export const MAX_PRESIGN_SECONDS = 7 * 24 * 3600;

/** The platform's S3 bucket, or a customer's: objects and presigned URLs through the AWS SDK. */
export class S3ObjectStore implements ObjectStore {
  readonly provider = 's3';
  readonly bucket: string;
  readonly keyPrefix: string;
  private readonly client: S3Client;

  constructor(options: S3ObjectStoreOptions) {
    this.bucket = options.bucket;
    this.keyPrefix = options.keyPrefix ?? '';
    this.client = new S3Client({
      endpoint: options.endpoint,
      region: options.region,
      credentials: { accessKeyId: options.accessKeyId, secretAccessKey: options.secretAccessKey },
      forcePathStyle: options.forcePathStyle ?? false,
      maxAttempts: options.maxAttempts ?? 3,
      requestHandler: { connectionTimeout: 5_000, requestTimeout: options.requestTimeoutMs ?? 30_000 },
      // The SDK's default (WHEN_SUPPORTED) sends streamed bodies aws-chunked with trailing
      // checksums, which older S3-compatible stores (s3rver, old MinIO) save framing and all,
      // and it pins the CRC32 of an empty body into presigned PUT URLs, so S3 would reject
      // every agent upload with BadDigest.
      requestChecksumCalculation: 'WHEN_REQUIRED',
      responseChecksumValidation: 'WHEN_REQUIRED',
    });
  }

  async put(key: string, data: Buffer | readonly Buffer[], contentType: string): Promise<void> {
    const fullKey = this.fullKey(key);
    const length = Buffer.isBuffer(data) ? data.length : data.reduce((sum, part) => sum + part.length, 0);
    await this.call('write', fullKey, () => this.client.send(new PutObjectCommand({
      // Parts are streamed one after the other, their total length declared (no chunked encoding, see the client's options).
      Bucket: this.bucket, Key: fullKey, Body: Buffer.isBuffer(data) ? data : Readable.from(data), ContentType: contentType || DEFAULT_CONTENT_TYPE, ContentLength: length,
    })));
  }

  /** One PutObject with the length declared, aborted as soon as the source breaks; a broken upload leaves no object. */
  async putSized(key: string, source: Readable, contentType: string, bytes: number): Promise<void> {
    const fullKey = this.fullKey(key);
    let failure: Error | undefined;
    // A body that fails part-way leaves the store waiting for the rest: the request is aborted at once.
    const abort = new AbortController();
    const counted = pipeline(source, exactly(bytes), (error) => {
      if (!error) return;
      failure = error;
      abort.abort(error);
    });
    try {
      await this.call('write', fullKey, () => this.client.send(new PutObjectCommand({
        Bucket: this.bucket, Key: fullKey, Body: counted, ContentType: contentType || DEFAULT_CONTENT_TYPE, ContentLength: bytes,
      }), { abortSignal: abort.signal }));
    } catch (error) {
      // S3 keeps no object of an aborted PUT, but some compatible stores (s3rver) keep what arrived.
      await this.delete(key).catch(() => undefined);
      // The source's own failure (too long, cut short) names the problem better than the S3 call it broke.
      throw failure ?? error;
    }
  }

  async get(key: string): Promise<{ data: Buffer; contentType: string } | null> {
    const fullKey = this.fullKey(key);
    return await this.call('read', fullKey, async () => {
      try {
        const response = await this.client.send(new GetObjectCommand({ Bucket: this.bucket, Key: fullKey }));
        const bytes = await response.Body!.transformToByteArray();
        return { data: Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength), contentType: response.ContentType ?? DEFAULT_CONTENT_TYPE };
      } catch (error) {
        if (error instanceof S3ServiceException && error.name === 'NoSuchKey') return null;
        throw error;
      }
    });
  }

  /** The response body as it arrives: the SDK's Node stream, which S3's connection fills only as it is read. */
  async open(key: string): Promise<OpenedObject | null> {
    const fullKey = this.fullKey(key);
    return await this.call('read', fullKey, async () => {
      try {
        const response = await this.client.send(new GetObjectCommand({ Bucket: this.bucket, Key: fullKey }));
        return { stream: response.Body as Readable, size: response.ContentLength ?? 0, contentType: response.ContentType ?? DEFAULT_CONTENT_TYPE };
      } catch (error) {
        if (error instanceof S3ServiceException && error.name === 'NoSuchKey') return null;
        throw error;
      }
    });
  }

  async getRange(key: string, offset: number, length: number): Promise<Buffer | null> {
    const fullKey = this.fullKey(key);
    if (length <= 0) return (await this.head(key)) ? Buffer.alloc(0) : null;
    return await this.call('read', fullKey, async () => {
      try {
        const response = await this.client.send(new GetObjectCommand({ Bucket: this.bucket, Key: fullKey, Range: `bytes=${offset}-${offset + length - 1}` }));
        const bytes = await response.Body!.transformToByteArray();
        // A store that ignores Range answers the whole object (200): cut it here.
        const whole = response.ContentRange === undefined && bytes.byteLength > length;
        const data = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
        return whole ? data.subarray(offset, offset + length) : data;
      } catch (error) {
        if (error instanceof S3ServiceException && error.name === 'NoSuchKey') return null;
        // A range that starts past the end: the object is there, these bytes are not.
        if (error instanceof S3ServiceException && error.name === 'InvalidRange') return Buffer.alloc(0);
        throw error;
      }
    });
  }

  async head(key: string): Promise<{ size: number; contentType: string } | null> {
    const fullKey = this.fullKey(key);
    return await this.call('head', fullKey, async () => {
      try {
        const response = await this.client.send(new HeadObjectCommand({ Bucket: this.bucket, Key: fullKey }));
        return { size: response.ContentLength ?? 0, contentType: response.ContentType ?? DEFAULT_CONTENT_TYPE };
      } catch (error) {
        // HEAD responses have no body, so a missing key is only a bare 404.
        if (error instanceof S3ServiceException && error.$metadata.httpStatusCode === 404) return null;
        throw error;
      }
    });
  }

  async delete(key: string): Promise<void> {
    const fullKey = this.fullKey(key);
    await this.call('delete', fullKey, () => this.client.send(new DeleteObjectCommand({ Bucket: this.bucket, Key: fullKey })));
  }

  /** The content type is signed: the upload must send exactly the returned `content-type`. */
  async presignPut(key: string, contentType: string, expiresInSeconds: number): Promise<PresignedUpload> {
    const fullKey = this.fullKey(key);
    const type = contentType || DEFAULT_CONTENT_TYPE;
    const url = await getSignedUrl(this.client, new PutObjectCommand({ Bucket: this.bucket, Key: fullKey, ContentType: type }), {
      expiresIn: presignLifetime(expiresInSeconds), signableHeaders: new Set(['content-type']),
    });
    return { url, method: 'PUT', headers: { 'content-type': type } };
  }

  async presignGet(key: string, expiresInSeconds: number): Promise<string> {
    const fullKey = this.fullKey(key);
    return await getSignedUrl(this.client, new GetObjectCommand({ Bucket: this.bucket, Key: fullKey }), {
      expiresIn: presignLifetime(expiresInSeconds),
    });
  }

  /** Closes the client's pooled connections. */
  close(): void {
    this.client.destroy();
  }

  private fullKey(key: string): string {
    assertObjectKey(key);
    const fullKey = this.keyPrefix + key;
    assertObjectKey(fullKey);
    return fullKey;
  }

  private async call<T>(operation: 'write' | 'read' | 'head' | 'delete', fullKey: string, run: () => Promise<T>): Promise<T> {
    try {
      return await run();
    } catch (error) {
      const code = operation === 'write' ? 'storage_upload_failed' : 'upstream_error';
      throw new AppError(code, `${operation} of s3://${this.bucket}/${fullKey} failed: ${describeS3Error(error)}`, { cause: error });
    }
  }
}

/** An S3 failure as one readable line: the service's error code and message, or the HTTP status. */
export function describeS3Error(error: unknown): string {
  if (error instanceof S3ServiceException) {
    const status = error.$metadata.httpStatusCode;
    const message = error.message && error.message !== 'UnknownError' ? error.message : `HTTP ${status ?? 'error'}`;
    return `${error.name}: ${message}`;
  }
  // Duck-typed: socket errors can come from another realm (jest's sandbox), failing instanceof.
  if (typeof error === 'object' && error !== null && 'message' in error) {
    const name = 'name' in error && typeof error.name === 'string' && error.name !== 'Error' ? `${error.name}: ` : '';
    return `${name}${String(error.message)}`;
  }
  return String(error);
}

/** Passes `bytes` bytes through; more, or an end before all of them, fails the stream. */
function exactly(bytes: number): Transform {
  let seen = 0;
  return new Transform({
    transform(chunk: Buffer, _encoding, callback) {
      seen += chunk.length;
      if (seen > bytes) callback(new AppError('body_too_large', `upload is larger than the declared ${bytes} bytes`));
      else callback(null, chunk);
    },
    flush(callback) {
      callback(seen === bytes ? null : new AppError('invalid_request', `the upload ended after ${seen} of its ${bytes} bytes`, { param: 'content-length' }));
    },
  });
}

function presignLifetime(seconds: number): number {
  if (!Number.isSafeInteger(seconds) || seconds < 1 || seconds > MAX_PRESIGN_SECONDS) {
    throw new AppError('invalid_request', `link lifetime must be 1 to ${MAX_PRESIGN_SECONDS} seconds, got ${seconds}`, { param: 'expiresInSeconds' });
  }
  return seconds;
}
