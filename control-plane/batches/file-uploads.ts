import { randomBytes } from 'node:crypto';
import type { Readable } from 'node:stream';
import type { DataSource, Repository } from 'typeorm';
import type { Catalog } from '../catalog/catalog';
import type { Deployment } from '../deployments/deployment.entity';
import { AppError } from '../errors/app-error';
import { quoteValue, shortened } from '../errors/quote-value';
import { batchEndpointsOf } from './batch-create-input';
import type { BatchFiles } from './batch-files';
import { checkedFilename } from './batch-files';
import type { BatchBudget } from './batch-service';
import type { BatchFile } from './batch.entities';
import { FileUploadClaim } from './file-upload-claim.entity';
import { uploadLinkPath, verifyUploadLink, type UploadLinkGrant } from './upload-link';

export interface FileUploadOptions {
  /** The largest upload a link may declare: the Files API's bound and the adapters' (FILES_MAX_BYTES, ADAPTER_MAX_BYTES), whichever is lower. */
  maxBytes: number;
  /** How long a link may be started (ADAPTER_UPLOAD_LINK_TTL_SECONDS); an upload under way when it expires finishes. */
  linkTtlSeconds: number;
  /** The key of the local store's links (STORAGE_SIGNING_KEY): every server behind one load balancer shares it, so any of them takes the PUT. */
  signingKey: Buffer;
  /** The gateway's public base URL, read per link (known once the server listens). */
  publicUrl: () => string;
  /** @default Date.now */
  now?: () => number;
}

export interface UploadLinkRequest {
  deploymentId: string;
  filename: string;
  bytes: number;
}

export interface UploadLink {
  /** Absolute, on the gateway's public URL. */
  readonly url: string;
  /** The same link as a path: a page on the gateway's origin PUTs here whatever host name it was opened under. */
  readonly path: string;
  readonly fileId: string;
  readonly expiresAt: Date;
  readonly bytes: number;
}

/**
 * A claim is deleted this long after its link expired. An upload started just before the expiry
 * may still be storing its bytes after it (the expiry is checked when the PUT starts): a day is
 * far past what the connection budget lets one body take, so the sweep never removes an object
 * whose row is about to be inserted.
 */
const CLAIM_GRACE_MS = 24 * 3600_000;
const SWEEP_PAGE = 100;

/**
 * Signed one-time upload links for the Files API (`user_data`): the console, which speaks only
 * GraphQL, asks for one (`createAdapterUploadLink`) and PUTs a file's raw bytes to it; the file
 * is created under the id the link named, in the link's workspace and deployment, streamed to
 * the object store. One use per link: the claim row (file-upload-claim.entity.ts) is inserted
 * before a byte is read, so a second use, even a concurrent one, is refused with 409.
 */
export class FileUploads {
  private readonly claims: Repository<FileUploadClaim>;
  private readonly now: () => number;

  constructor(
    dataSource: DataSource,
    private readonly files: Pick<BatchFiles, 'receive' | 'placement' | 'exists' | 'removeObjects'>,
    private readonly deployments: { get(workspaceId: string, id: string): Promise<Deployment> },
    private readonly catalog: Pick<Catalog, 'find'>,
    private readonly budget: Pick<BatchBudget, 'admitFile' | 'holdFile'>,
    private readonly options: FileUploadOptions,
    private readonly newFileId: () => string = () => `file-${randomBytes(12).toString('hex')}`,
  ) {
    this.claims = dataSource.getRepository(FileUploadClaim);
    this.now = options.now ?? Date.now;
  }

  /** A link for one file of at most `bytes` bytes in `deploymentId`'s Files API; refusals name `deploymentId`, `filename` or `bytes`. */
  async createLink(workspaceId: string, request: UploadLinkRequest): Promise<UploadLink> {
    const deployment = await this.deploymentOf(workspaceId, request.deploymentId);
    const filename = checkedName(request.filename);
    if (!Number.isSafeInteger(request.bytes) || request.bytes < 1) {
      throw new AppError('invalid_request', `bytes must be the file's size, a whole number of at least 1, got ${request.bytes}`, { param: 'bytes' });
    }
    if (request.bytes > this.options.maxBytes) {
      throw new AppError('invalid_request', `the file is ${request.bytes} bytes; uploads may be at most ${this.options.maxBytes} bytes (FILES_MAX_BYTES, ADAPTER_MAX_BYTES)`, { param: 'bytes' });
    }
    await this.budget.admitFile(workspaceId, request.bytes);
    const expires = Math.floor(this.now() / 1000) + this.options.linkTtlSeconds;
    const grant: UploadLinkGrant = { fileId: this.newFileId(), workspaceId, deploymentId: deployment.id, filename, bytes: request.bytes, expires };
    const path = uploadLinkPath(this.options.signingKey, grant);
    return { url: `${this.options.publicUrl().replace(/\/+$/, '')}${path}`, path, fileId: grant.fileId, expiresAt: new Date(expires * 1000), bytes: grant.bytes };
  }

  /** Checks a link as the PUT presents it: its grant, or 403 (tampered, expired). */
  verify(fileId: string, query: (name: 'workspace' | 'deployment' | 'filename' | 'bytes' | 'expires' | 'signature') => string): UploadLinkGrant {
    return verifyUploadLink(this.options.signingKey, Math.floor(this.now() / 1000), fileId, query);
  }

  /**
   * The PUT: `length` bytes (its content-length, within the declared size) streamed from `body`
   * into the file the grant names. The claim goes first, so the link is spent even if the upload
   * then fails (a new link is one mutation away); a failed upload leaves no file and no object.
   */
  async receive(grant: UploadLinkGrant, body: Readable, length: number): Promise<BatchFile> {
    if (length > grant.bytes) {
      throw new AppError('body_too_large', `the body is ${length} bytes; this link takes at most the ${grant.bytes} bytes it was made for`, { param: 'content-length' });
    }
    if (length < 1) throw new AppError('invalid_request', 'the body is empty: an upload carries the file\'s bytes', { param: 'content-length' });
    // The workspace or deployment may have been deleted since the link was made.
    const deployment = await this.deploymentOf(grant.workspaceId, grant.deploymentId);
    await this.budget.admitFile(grant.workspaceId, length);
    const placement = this.files.placement(deployment, grant.fileId);
    const inserted = await this.claims.createQueryBuilder().insert().into(FileUploadClaim).values({
      fileId: grant.fileId, workspaceId: grant.workspaceId, storageCredentialId: placement.storageCredentialId, objectKey: placement.objectKey,
      expiresAt: new Date(grant.expires * 1000), createdAt: new Date(this.now()),
    }).orIgnore().returning('file_id').execute();
    if (inserted.raw.length === 0) {
      throw new AppError('upload_link_used', `this upload link was used already (file '${grant.fileId}'); ask for a new one (createAdapterUploadLink)`);
    }
    return await this.files.receive(deployment, grant.fileId, grant.filename, body, length,
      (manager) => this.budget.holdFile(manager, grant.workspaceId, length));
  }

  /**
   * Claims past their link's expiry (and the grace) are deleted; one without a file row marks
   * an upload whose server died after storing the bytes: its object is removed. Returns how many went.
   */
  async sweep(): Promise<number> {
    const before = new Date(this.now() - CLAIM_GRACE_MS);
    const stale = await this.claims.createQueryBuilder('claim').where('claim.expires_at < :before', { before }).orderBy('claim.expires_at').limit(SWEEP_PAGE).getMany();
    for (const claim of stale) {
      if (!(await this.files.exists(claim.fileId))) await this.files.removeObjects([claim]);
      await this.claims.delete({ fileId: claim.fileId });
    }
    return stale.length;
  }

  private async deploymentOf(workspaceId: string, deploymentId: string): Promise<Deployment> {
    const deployment = await this.deployments.get(workspaceId, deploymentId).catch((error: unknown) => {
      // Another workspace's deployment is unknown here, as a made-up id.
      throw error instanceof AppError ? new AppError('not_found', `no deployment ${quoteValue(shortened(deploymentId))}`, { param: 'deploymentId', cause: error }) : error;
    });
    if (batchEndpointsOf(this.catalog.find(deployment.modelId)).length === 0) {
      throw new AppError('invalid_request', `deployment '${deployment.id}' serves '${deployment.modelId}', which takes no files: upload to a deployment of a chat, completion or embedding model`, { param: 'deploymentId' });
    }
    return deployment;
  }
}

function checkedName(filename: string): string {
  try {
    return checkedFilename(filename, 'weights.bin');
  } catch (error) {
    throw error instanceof AppError ? new AppError('invalid_request', error.message, { param: 'filename', cause: error }) : error;
  }
}
