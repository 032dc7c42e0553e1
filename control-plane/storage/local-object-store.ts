import fs from 'node:fs';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { AppError } from '../errors/app-error';
import { AtomicFiles } from './atomic-file';
import { assertLinkValid, linkSignature, type LinkMethod } from './link-signature';
import { assertObjectKey, bucketNameProblem } from './object-names';
import { DEFAULT_CONTENT_TYPE, type ObjectStore, type OpenedObject, type PresignedUpload } from './object-store';
import { quoteValue, shortened } from '../errors/quote-value';

export interface LocalObjectStoreOptions {
  /** `<dataDir>/objects`: objects live at `<rootDir>/<bucket>/<key>`. */
  rootDir: string;
  /** The request record's `output_bucket`; follows S3 naming rules so keys and names move to S3 unchanged. */
  bucket: string;
  /** Base URL of the gateway serving `/files/…`; read per link because it is known only once the server listens. */
  publicUrl: () => string;
  /** HMAC-SHA256 key of links; every instance behind one load balancer must share it. */
  signingKey: Buffer;
  /** Clock in milliseconds (tests move it to expire links). @default Date.now */
  now?: () => number;
}

/**
 * The embedded default object store: plain files under the data directory, links signed with
 * HMAC and served by the gateway (`gateway/files/file-link.route.ts`). Content types live in a
 * parallel `_meta/` tree rather than beside the object, so no key can collide with a sidecar
 * (`_` cannot start a bucket name).
 */
export class LocalObjectStore implements ObjectStore {
  readonly provider = 'local';
  readonly bucket: string;
  private readonly objectsDir: string;
  private readonly metaDir: string;
  private readonly files: AtomicFiles;
  private readonly now: () => number;

  constructor(private readonly options: LocalObjectStoreOptions) {
    const problem = bucketNameProblem(options.bucket);
    if (problem) throw new Error(`local object store: bucket name ${JSON.stringify(options.bucket)} ${problem}`);
    if (options.signingKey.length < 32) throw new Error('local object store: the link signing key must be at least 32 bytes');
    this.bucket = options.bucket;
    const root = path.resolve(options.rootDir);
    this.objectsDir = path.join(root, options.bucket);
    this.metaDir = path.join(root, '_meta', options.bucket);
    this.files = new AtomicFiles(path.join(root, '_tmp'));
    this.now = options.now ?? Date.now;
  }

  async put(key: string, data: Buffer | readonly Buffer[], contentType: string): Promise<void> {
    assertObjectKey(key);
    await this.place(key, await this.files.stage(data), contentType);
  }

  /** Streams an upload into place, refusing (`body_too_large`) past `maxBytes`; the old object stays until then. */
  async putStream(key: string, source: Readable, contentType: string, maxBytes: number): Promise<number> {
    assertObjectKey(key);
    const { temporary, size } = await this.files.receive(source, maxBytes);
    await this.place(key, temporary, contentType);
    return size;
  }

  async putSized(key: string, source: Readable, contentType: string, bytes: number): Promise<void> {
    assertObjectKey(key);
    const { temporary, size } = await this.files.receive(source, bytes);
    if (size !== bytes) {
      await this.files.discard(temporary);
      throw new AppError('invalid_request', `the upload ended after ${size} of its ${bytes} bytes`, { param: 'content-length' });
    }
    await this.place(key, temporary, contentType);
  }

  async get(key: string): Promise<{ data: Buffer; contentType: string } | null> {
    const data = await missingAsNull(fs.promises.readFile(this.objectPath(key)));
    return data ? { data, contentType: await this.readContentType(key) } : null;
  }

  async head(key: string): Promise<{ size: number; contentType: string } | null> {
    const stat = await missingAsNull(fs.promises.stat(this.objectPath(key)));
    return stat?.isFile() ? { size: stat.size, contentType: await this.readContentType(key) } : null;
  }

  /** Opens the object for streaming; size and bytes come from one file handle, so a concurrent overwrite cannot mix them. */
  async open(key: string): Promise<OpenedObject | null> {
    const handle = await missingAsNull(fs.promises.open(this.objectPath(key), 'r'));
    if (!handle) return null;
    const stat = await handle.stat();
    if (!stat.isFile()) {
      await handle.close();
      return null;
    }
    return { stream: handle.createReadStream(), size: stat.size, contentType: await this.readContentType(key) };
  }

  async getRange(key: string, offset: number, length: number): Promise<Buffer | null> {
    const handle = await missingAsNull(fs.promises.open(this.objectPath(key), 'r'));
    if (!handle) return null;
    try {
      const buffer = Buffer.allocUnsafe(length);
      let filled = 0;
      while (filled < length) {
        const { bytesRead } = await handle.read(buffer, filled, length - filled, offset + filled);
        if (bytesRead === 0) break;
        filled += bytesRead;
      }
      return buffer.subarray(0, filled);
    } finally {
      await handle.close();
    }
  }

  async delete(key: string): Promise<void> {
    await fs.promises.rm(this.objectPath(key), { force: true });
    await fs.promises.rm(this.metaPath(key), { force: true });
  }

  async presignPut(key: string, contentType: string, expiresInSeconds: number): Promise<PresignedUpload> {
    return { url: this.link('PUT', key, expiresInSeconds), method: 'PUT', headers: { 'content-type': contentType } };
  }

  async presignGet(key: string, expiresInSeconds: number): Promise<string> {
    return this.link('GET', key, expiresInSeconds);
  }

  /** Throws `permission_denied` for a tampered, foreign-bucket or expired link. */
  verifyLink(method: string, bucket: string, key: string, expires: string | number, signature: string): void {
    if (bucket !== this.bucket) throw new AppError('permission_denied', `this link is not valid: bucket '${shortened(bucket)}' is not served here`);
    assertLinkValid(this.options.signingKey, Math.floor(this.now() / 1000), { method, bucket, key, expires, signature });
  }

  private link(method: LinkMethod, key: string, expiresInSeconds: number): string {
    assertObjectKey(key);
    if (!Number.isSafeInteger(expiresInSeconds) || expiresInSeconds < 1) {
      throw new AppError('invalid_request', `link lifetime must be a positive whole number of seconds, got ${expiresInSeconds}`, { param: 'expiresInSeconds' });
    }
    const expires = Math.floor(this.now() / 1000) + expiresInSeconds;
    const signature = linkSignature(this.options.signingKey, method, this.bucket, key, expires);
    const base = this.options.publicUrl().replace(/\/+$/, '');
    const encodedKey = key.split('/').map(encodeURIComponent).join('/');
    return `${base}/files/${this.bucket}/${encodedKey}?expires=${expires}&method=${method}&signature=${signature}`;
  }

  /** Content type first, then the bytes: a failed rename (a key/folder conflict) takes its content type with it. */
  private async place(key: string, temporary: string, contentType: string): Promise<void> {
    try {
      await this.writeContentType(key, contentType);
    } catch (error) {
      await this.files.discard(temporary);
      throw error;
    }
    try {
      await this.files.commit(temporary, this.objectPath(key));
    } catch (error) {
      if ((await this.head(key)) === null) await fs.promises.rm(this.metaPath(key), { force: true });
      throw error;
    }
  }

  private async writeContentType(key: string, contentType: string): Promise<void> {
    await this.files.write(this.metaPath(key), JSON.stringify({ contentType: contentType || DEFAULT_CONTENT_TYPE }));
  }

  private async readContentType(key: string): Promise<string> {
    const meta = await missingAsNull(fs.promises.readFile(this.metaPath(key), 'utf8'));
    return meta ? String(JSON.parse(meta).contentType) : DEFAULT_CONTENT_TYPE;
  }

  private objectPath(key: string): string {
    return this.within(this.objectsDir, key, '');
  }

  private metaPath(key: string): string {
    return this.within(this.metaDir, key, '.json');
  }

  /** Key rules already forbid escaping; the resolved-path check is a second, independent wall. */
  private within(directory: string, key: string, suffix: string): string {
    assertObjectKey(key);
    const resolved = path.resolve(directory, key + suffix);
    if (!resolved.startsWith(directory + path.sep)) {
      throw new AppError('invalid_request', `object key ${quoteValue(key)} leaves the bucket directory`, { param: 'key' });
    }
    return resolved;
  }
}

/** ENOENT (missing) and ENOTDIR/EISDIR (a key that is a "directory" of other keys) mean no object. */
async function missingAsNull<T>(promise: Promise<T>): Promise<T | null> {
  try {
    return await promise;
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || code === 'ENOTDIR' || code === 'EISDIR') return null;
    throw error;
  }
}
