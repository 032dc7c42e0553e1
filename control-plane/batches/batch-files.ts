import { randomBytes } from 'node:crypto';
import type { Readable } from 'node:stream';
import { IsNull, type DataSource, type EntityManager, type Repository } from 'typeorm';
import { MAX_JSON_CONTAINERS, MAX_JSON_DEPTH } from '../../common/json-nesting';
import { findLoneSurrogate, findNulByte } from '../database/nul-bytes';
import type { Deployment } from '../deployments/deployment.entity';
import { AppError } from '../errors/app-error';
import { quoteValue, shortened } from '../errors/quote-value';
import { DEFAULT_CONTENT_TYPE, type ObjectStore, type OpenedObject } from '../storage/object-store';
import type { StorageCredentialService } from '../storage/storage-credential.service';
import { BatchFile, type BatchFilePurpose } from './batch.entities';
import { cursorPage, type CursorPage, type PageRequest } from './cursor-page';
import { firstDeepLine } from './jsonl-lines';
import { WorkSlices } from './work-slices';

/** The content type files are stored and served with. */
export const JSONL_CONTENT_TYPE = 'application/jsonl';

export interface FileUpload {
  readonly filename: string;
  readonly data: Buffer;
  /** As the client sent it: `batch`, or `user_data` (an adapter's weights, any bytes). */
  readonly purpose: string;
}

export interface FileListRequest extends PageRequest {
  readonly purpose?: string;
  /** Oldest first (`asc`) or newest first (`desc`, the default). */
  readonly order?: 'asc' | 'desc';
}

const MAX_FILENAME_CHARACTERS = 512;
/** OpenAI's bound of a file listing. */
export const MAX_LIST_LIMIT = 10_000;
const FILE_ID = /^file-[0-9a-f]{24}$/;

/**
 * The files of a deployment endpoint (`/files`): batch input files its clients upload, and the
 * output and error files of its batches. Bytes live in the object store under the workspace
 * (`<workspaceId>/files/<fileId>.jsonl` in the managed store; `files/<fileId>.jsonl` in the
 * deployment's own bucket when it has a default storage credential, which holds only that
 * customer's objects); rows in `batch_files`. A file belongs to one workspace and one
 * deployment: asked for through any other, it does not exist (404).
 */
export class BatchFiles {
  private readonly files: Repository<BatchFile>;

  constructor(
    dataSource: DataSource,
    private readonly managed: ObjectStore,
    private readonly credentials: Pick<StorageCredentialService, 'storeFor'>,
    private readonly options: { maxBytes: number },
    /** OpenAI's form: `file-` and random hex. */
    private readonly newFileId: () => string = () => `file-${randomBytes(12).toString('hex')}`,
  ) {
    this.files = dataSource.getRepository(BatchFile);
  }

  /** `POST /files`: a batch input file. */
  async upload(deployment: Pick<Deployment, 'id' | 'workspaceId' | 'storageCredentialId'>, upload: FileUpload, hold?: (manager: EntityManager) => Promise<void>): Promise<BatchFile> {
    if (upload.purpose !== 'batch' && upload.purpose !== 'user_data') {
      throw new AppError('invalid_request', `purpose must be "batch" (a batch's input) or "user_data" (a LoRA adapter's weights); got ${shortened(JSON.stringify(upload.purpose))}`, { param: 'purpose' });
    }
    if (upload.data.length > this.options.maxBytes) {
      throw new AppError('body_too_large', `file is ${upload.data.length} bytes; files may be at most ${this.options.maxBytes} bytes`, { param: 'file' });
    }
    if (upload.purpose === 'user_data') {
      if (upload.data.length === 0) throw new AppError('invalid_request', 'file is empty', { param: 'file' });
      return await this.write(deployment, 'user_data', checkedFilename(upload.filename, 'weights.bin'), upload.data, null, true, hold);
    }
    if (upload.data.length === 0) throw new AppError('invalid_request', 'file is empty: a batch input file holds one JSON request per line', { param: 'file' });
    // Refused before it is stored: a file of over-deep (or container-stuffed) lines would otherwise cost every batch made of it a parse of each line.
    const deep = await firstDeepLine(upload.data, new WorkSlices());
    if (deep !== null) {
      const why = deep.problem === 'depth' ? `nests arrays and objects more than ${MAX_JSON_DEPTH} levels deep` : `holds more than ${MAX_JSON_CONTAINERS} arrays and objects`;
      throw new AppError('invalid_request', `line ${deep.line} of the file ${why}; no request may`, { param: 'file' });
    }
    return await this.write(deployment, 'batch', checkedFilename(upload.filename, 'input.jsonl'), upload.data, null, true, hold);
  }

  /**
   * A `user_data` file streamed in by an upload link (file-uploads.ts) under the id the link
   * named: the bytes go to the store first and the row is inserted only once they are whole, so
   * no half-written file is ever listed, found or registered as an adapter (the caller's
   * claim records `placement` first, so an object a crash leaves behind is removed later).
   */
  async receive(
    deployment: Pick<Deployment, 'id' | 'workspaceId' | 'storageCredentialId'>, id: string, filename: string, source: Readable, bytes: number,
    hold: (manager: EntityManager) => Promise<void>,
  ): Promise<BatchFile> {
    if (!FILE_ID.test(id)) throw new AppError('invalid_request', `file id ${quoteValue(id)} is not a file id`, { param: 'id' });
    const file = this.newRow(deployment, id, 'user_data', checkedFilename(filename, 'weights.bin'), bytes, null);
    const store = await this.storeOf(file);
    try {
      await store.putSized(file.objectKey, source, DEFAULT_CONTENT_TYPE, bytes);
    } finally {
      if (store !== this.managed) store.close?.();
    }
    try {
      await this.files.manager.transaction(async (manager) => {
        await hold(manager);
        await manager.insert(BatchFile, file);
      });
    } catch (error) {
      await this.removeObject(file).catch(() => undefined);
      throw error;
    }
    return file;
  }

  /** Where a file of this deployment with this id lives: the store and key (an upload's claim records them before the bytes arrive). */
  placement(deployment: Pick<Deployment, 'id' | 'workspaceId' | 'storageCredentialId'>, id: string): Pick<BatchFile, 'workspaceId' | 'storageCredentialId' | 'objectKey'> {
    const { workspaceId, storageCredentialId, objectKey } = this.newRow(deployment, id, 'user_data', '', 0, null);
    return { workspaceId, storageCredentialId, objectKey };
  }

  /**
   * Stores a batch's output or error file; the row is inserted by `manager` (the batch's
   * terminal transaction), so a file exists if and only if its batch names it. Returns the row.
   */
  async writeOutput(
    deployment: Pick<Deployment, 'id' | 'workspaceId' | 'storageCredentialId'>, batchId: string, filename: string, data: readonly Buffer[],
  ): Promise<BatchFile> {
    return await this.write(deployment, 'batch_output', filename, data, batchId, false);
  }

  /**
   * Inserts rows built by `writeOutput` in the caller's transaction. The deployment's and the
   * workspace's rows are locked first: a deletion waits for this insert (and then marks these
   * files deleted), or went first and these rows are inserted deleted; either way no file of a
   * deleted deployment or workspace is left behind.
   */
  async insert(manager: EntityManager, files: BatchFile[]): Promise<void> {
    if (files.length === 0) return;
    const [owner] = await manager.query(`
      SELECT d.status = 'Deleted' OR w.deleted_at IS NOT NULL AS deleted FROM deployments d JOIN workspaces w ON w.id = d.workspace_id
      WHERE d.id = $1 FOR SHARE OF d, w`, [files[0].deploymentId]);
    if (!owner || owner.deleted) for (const file of files) file.deletedAt = new Date();
    await manager.insert(BatchFile, files);
  }

  /** Removes objects written for rows that were never inserted (a finalization that lost its batch). */
  async discard(files: BatchFile[]): Promise<void> {
    for (const file of files) await this.removeObject(file).catch(() => undefined);
  }

  /** `GET /files`: newest first unless `order: asc`, `after` a file id of the same listing. */
  async list(workspaceId: string, deploymentId: string | undefined, request: FileListRequest): Promise<CursorPage<BatchFile>> {
    if (!Number.isInteger(request.limit) || request.limit < 1 || request.limit > MAX_LIST_LIMIT) {
      throw new AppError('invalid_request', `limit must be an integer from 1 to ${MAX_LIST_LIMIT}, got ${request.limit}`, { param: 'limit' });
    }
    const order = request.order ?? 'desc';
    const query = this.files.createQueryBuilder('file').where('file.workspace_id = :workspaceId AND file.deleted_at IS NULL', { workspaceId });
    if (deploymentId) query.andWhere('file.deployment_id = :deploymentId', { deploymentId });
    if (request.purpose !== undefined) query.andWhere('file.purpose = :purpose', { purpose: request.purpose });
    return await cursorPage(query, 'file', order, request, (id) => this.find(workspaceId, deploymentId, id), 'file');
  }

  /** The file, or 404 (unknown, another workspace's, another deployment's). */
  async get(workspaceId: string, deploymentId: string | undefined, id: string): Promise<BatchFile> {
    const file = await this.find(workspaceId, deploymentId, id);
    if (!file) throw new AppError('not_found', `no file '${shortened(id)}' here`, { param: 'id' });
    return file;
  }

  async find(workspaceId: string, deploymentId: string | undefined, id: string): Promise<BatchFile | null> {
    if (!FILE_ID.test(id)) return null;
    return await this.files.findOne({ where: { id, workspaceId, ...(deploymentId ? { deploymentId } : {}), deletedAt: IsNull() } });
  }

  /** A batch's input file, deleted by its owner or not: its bytes stay until the batch ends. Null once it is gone. */
  async inputOf(batch: { workspaceId: string; deploymentId: string; inputFileId: string }): Promise<BatchFile | null> {
    if (!FILE_ID.test(batch.inputFileId)) return null;
    return await this.files.findOne({ where: { id: batch.inputFileId, workspaceId: batch.workspaceId, deploymentId: batch.deploymentId } });
  }

  /**
   * `GET /files/{id}/content`: the file opened as a stream from the object store (the caller
   * sends it as the client reads, and destroys it if the client goes).
   */
  async content(workspaceId: string, deploymentId: string | undefined, id: string): Promise<{ file: BatchFile; opened: OpenedObject }> {
    const file = await this.get(workspaceId, deploymentId, id);
    const opened = await this.open(file);
    if (!opened) throw new AppError('not_found', `the content of file '${id}' is no longer in storage`, { param: 'id' });
    return { file, opened };
  }

  /** The file's bytes as a stream, or null when its object is gone. */
  async open(file: BatchFile): Promise<OpenedObject | null> {
    const store = await this.storeOf(file);
    if (store === this.managed) return await store.open(file.objectKey);
    // A customer bucket's client was built for this read: closed once the stream is done with.
    try {
      const opened = await store.open(file.objectKey);
      if (!opened) store.close?.();
      else opened.stream.once('close', () => store.close?.());
      return opened;
    } catch (error) {
      store.close?.();
      throw error;
    }
  }

  /** Up to `length` bytes of the file from `offset`, or null when its object is gone. */
  async readRange(file: BatchFile, offset: number, length: number): Promise<Buffer | null> {
    const store = await this.storeOf(file);
    try {
      return await store.getRange(file.objectKey, offset, length);
    } finally {
      if (store !== this.managed) store.close?.();
    }
  }

  /**
   * `DELETE /files/{id}`: gone for its owner at once (404, out of listings, no new batch can
   * use it). Its bytes go now, or once no unfinished batch reads them (batch-file-purge.ts):
   * deleting a batch's input file never breaks the batch. A batch that names the file keeps its id.
   */
  async delete(workspaceId: string, deploymentId: string | undefined, id: string): Promise<BatchFile> {
    const file = await this.get(workspaceId, deploymentId, id);
    await this.files.update({ id: file.id, workspaceId, deletedAt: IsNull() }, { deletedAt: () => 'clock_timestamp()' });
    return file;
  }

  /** Every file of a deployment or a workspace that is being deleted, marked deleted (purged as above). */
  async deleteAll(scope: { workspaceId: string; deploymentId?: string }): Promise<void> {
    await this.files.update({ workspaceId: scope.workspaceId, ...(scope.deploymentId ? { deploymentId: scope.deploymentId } : {}), deletedAt: IsNull() },
      { deletedAt: () => 'clock_timestamp()' });
  }

  /** Whether a row with this id exists, deleted or not (an upload link's file id, once used). */
  async exists(id: string): Promise<boolean> {
    return await this.files.exists({ where: { id } });
  }

  /** Removes the objects of files whose rows are being deleted (batch-file-purge.ts). */
  async removeObjects(files: Array<Pick<BatchFile, 'workspaceId' | 'storageCredentialId' | 'objectKey'>>): Promise<void> {
    for (const file of files) await this.removeObject(file);
  }

  private async write(
    deployment: Pick<Deployment, 'id' | 'workspaceId' | 'storageCredentialId'>, purpose: BatchFilePurpose, filename: string, data: Buffer | readonly Buffer[],
    batchId: string | null, insert = true, hold?: (manager: EntityManager) => Promise<void>,
  ): Promise<BatchFile> {
    const bytes = Buffer.isBuffer(data) ? data.length : data.reduce((sum, part) => sum + part.length, 0);
    const file = this.newRow(deployment, this.newFileId(), purpose, filename, bytes, batchId);
    const store = await this.storeOf(file);
    try {
      await store.put(file.objectKey, data, purpose === 'user_data' ? DEFAULT_CONTENT_TYPE : JSONL_CONTENT_TYPE);
    } finally {
      if (store !== this.managed) store.close?.();
    }
    if (insert) {
      try {
        if (hold) {
          await this.files.manager.transaction(async (manager) => {
            await hold(manager);
            await manager.insert(BatchFile, file);
          });
        } else {
          await this.files.insert(file);
        }
      } catch (error) {
        await this.removeObject(file).catch(() => undefined);
        throw error;
      }
    }
    return file;
  }

  private newRow(
    deployment: Pick<Deployment, 'id' | 'workspaceId' | 'storageCredentialId'>, id: string, purpose: BatchFilePurpose, filename: string, bytes: number, batchId: string | null,
  ): BatchFile {
    const extension = purpose === 'user_data' ? 'bin' : 'jsonl';
    const storageCredentialId = deployment.storageCredentialId ?? null;
    return this.files.create({
      id, workspaceId: deployment.workspaceId, deploymentId: deployment.id, purpose, filename, storageCredentialId, bytes,
      objectKey: storageCredentialId === null ? `${deployment.workspaceId}/files/${id}.${extension}` : `files/${id}.${extension}`, batchId, createdAt: new Date(), deletedAt: null,
    });
  }

  private async removeObject(file: Pick<BatchFile, 'workspaceId' | 'storageCredentialId' | 'objectKey'>): Promise<void> {
    const store = await this.storeOf(file);
    try {
      await store.delete(file.objectKey);
    } finally {
      if (store !== this.managed) store.close?.();
    }
  }

  private async storeOf(file: Pick<BatchFile, 'workspaceId' | 'storageCredentialId'>): Promise<ObjectStore> {
    return file.storageCredentialId === null ? this.managed : await this.credentials.storeFor(file.workspaceId, file.storageCredentialId);
  }
}

/** A client's file name, trimmed (or `fallback`), within the bound and free of what PostgreSQL text refuses. */
export function checkedFilename(name: string, fallback: string): string {
  const filename = name.trim() || fallback;
  if (filename.length > MAX_FILENAME_CHARACTERS || findNulByte(filename) || findLoneSurrogate(filename)) {
    throw new AppError('invalid_request', `the file's name must be at most ${MAX_FILENAME_CHARACTERS} characters, without NUL characters or unpaired surrogates`, { param: 'file' });
  }
  return filename;
}
