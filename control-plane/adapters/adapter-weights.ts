import { createHash } from 'node:crypto';
import { AdapterFormatError, inspectAdapter, type AdapterFacts } from '../../common/adapter-formats';
import type { BatchFiles } from '../batches/batch-files';
import type { CatalogModel } from '../catalog/catalog';
import type { Deployment } from '../deployments/deployment.entity';
import { AppError } from '../errors/app-error';
import { quoteValue, shortened } from '../errors/quote-value';
import { DEFAULT_CONTENT_TYPE, type ObjectStore } from '../storage/object-store';
import type { StorageCredentialService } from '../storage/storage-credential.service';
import type { AdapterFormat, AdapterSourceKind } from './adapter.entities';
import { checkChecksum, checkFormat, checkHuggingFaceRepo, checkRank, sniffFormat } from './adapter-rules';

/** Where new weights come from, as `createAdapter` and `updateAdapterWeights` take them: exactly one source. */
export interface WeightsInput {
  rank?: number | null;
  fileId?: string | null;
  bucketKey?: string | null;
  /** The deployment whose bucket holds `bucketKey`. */
  deploymentId?: string | null;
  huggingFaceRepo?: string | null;
  format?: string | null;
  checksum?: string | null;
}

/** Weights read, checked and ready to be kept: what a revision row records. */
export interface CheckedWeights {
  readonly sourceKind: AdapterSourceKind;
  readonly sourceRef: string;
  readonly format: AdapterFormat;
  readonly rank: number;
  /** Null for HUGGING_FACE (the engine host fetches them). */
  readonly bytes: Buffer | null;
  readonly sha256: string | null;
  readonly sizeBytes: number | null;
}

/**
 * Reads an adapter's weights from where the owner put them (a Files API upload of purpose
 * `user_data`, an object of a deployment's bucket) and checks them against what was declared
 * and against the base model (common/adapter-formats reads the headers): a bad file is a 400
 * naming the input field, at registration, never an engine that fails to load it later.
 */
export class AdapterWeights {
  constructor(
    private readonly files: Pick<BatchFiles, 'find' | 'readRange'>,
    private readonly credentials: Pick<StorageCredentialService, 'storeFor'>,
    private readonly deployments: { get(workspaceId: string, id: string): Promise<Deployment> },
    private readonly managed: ObjectStore,
    private readonly options: { maxBytes: number },
  ) {}

  async read(workspaceId: string, base: CatalogModel, input: WeightsInput): Promise<CheckedWeights> {
    const sources = (['fileId', 'bucketKey', 'huggingFaceRepo'] as const).filter((field) => input[field] !== undefined && input[field] !== null);
    if (sources.length !== 1) {
      throw new AppError('invalid_request', `give exactly one source of the weights: fileId, bucketKey (with deploymentId) or huggingFaceRepo${sources.length ? `; got ${sources.join(' and ')}` : ''}`, { param: sources[1] ?? 'fileId' });
    }
    const declaredRank = checkRank(input.rank);
    const declaredFormat = checkFormat(input.format);
    const checksum = checkChecksum(input.checksum);
    if (input.huggingFaceRepo) {
      if (declaredFormat !== null && declaredFormat !== 'HUGGING_FACE') {
        throw new AppError('invalid_request', `a huggingFaceRepo adapter's format is HUGGING_FACE, got ${declaredFormat}`, { param: 'format' });
      }
      if (declaredRank === null) throw new AppError('invalid_request', 'rank is required for a huggingFaceRepo adapter: the platform does not read its files', { param: 'rank' });
      if (checksum !== null) throw new AppError('invalid_request', 'checksum applies to uploaded weights; the engine host fetches a huggingFaceRepo itself', { param: 'checksum' });
      const repo = checkHuggingFaceRepo(input.huggingFaceRepo);
      return { sourceKind: 'HUGGING_FACE', sourceRef: repo, format: 'HUGGING_FACE', rank: declaredRank, bytes: null, sha256: null, sizeBytes: null };
    }
    if (declaredFormat === 'HUGGING_FACE') throw new AppError('invalid_request', 'format HUGGING_FACE needs huggingFaceRepo', { param: 'format' });
    const { bytes, sourceKind, sourceRef, field } = input.fileId ? await this.fromFile(workspaceId, input.fileId) : await this.fromBucket(workspaceId, input.bucketKey!, input.deploymentId);
    const sha256 = createHash('sha256').update(bytes).digest('hex');
    if (checksum !== null && checksum !== sha256) {
      throw new AppError('invalid_request', `checksum does not match the weights: they hash to sha256:${sha256}`, { param: 'checksum' });
    }
    const format = declaredFormat ?? sniffFormat(bytes);
    const facts = inspect(bytes, format, field, declaredFormat !== null);
    if (declaredRank !== null && declaredRank !== facts.rank) {
      throw new AppError('invalid_request', `rank ${declaredRank} was declared but the weights have rank ${facts.rank}`, { param: 'rank' });
    }
    checkBase(facts, base);
    return { sourceKind, sourceRef, format, rank: facts.rank, bytes, sha256, sizeBytes: bytes.length };
  }

  /** Keeps a revision's weights in the managed store, where links for agents are signed; returns the key. */
  async keep(workspaceId: string, adapterId: string, revision: number, weights: CheckedWeights): Promise<string | null> {
    if (!weights.bytes) return null;
    const key = `${workspaceId}/adapters/${adapterId}/r${revision}`;
    await this.managed.put(key, weights.bytes, DEFAULT_CONTENT_TYPE);
    return key;
  }

  async discard(keys: ReadonlyArray<string | null>): Promise<void> {
    for (const key of keys) if (key) await this.managed.delete(key).catch(() => undefined);
  }

  private async fromFile(workspaceId: string, fileId: string): Promise<{ bytes: Buffer; sourceKind: AdapterSourceKind; sourceRef: string; field: string }> {
    const file = await this.files.find(workspaceId, undefined, fileId);
    // Another workspace's file is unknown here, as a made-up id.
    if (!file) throw new AppError('invalid_request', `fileId ${quoteValue(fileId)} is not a file of this workspace`, { param: 'fileId' });
    if (file.purpose !== 'user_data') {
      throw new AppError('invalid_request', `fileId '${file.id}' was uploaded with purpose "${file.purpose}"; adapter weights are uploaded with purpose "user_data"`, { param: 'fileId' });
    }
    this.checkSize(file.bytes, 'fileId');
    const bytes = await this.files.readRange(file, 0, file.bytes);
    if (!bytes || bytes.length !== file.bytes) throw new AppError('invalid_request', `the content of file '${file.id}' is no longer in storage`, { param: 'fileId' });
    return { bytes, sourceKind: 'FILE', sourceRef: file.id, field: 'fileId' };
  }

  private async fromBucket(workspaceId: string, key: string, deploymentId: string | null | undefined): Promise<{ bytes: Buffer; sourceKind: AdapterSourceKind; sourceRef: string; field: string }> {
    if (!deploymentId) throw new AppError('invalid_request', 'deploymentId is required with bucketKey: the deployment whose bucket holds the weights', { param: 'deploymentId' });
    const deployment = await this.deployments.get(workspaceId, deploymentId).catch((error: unknown) => {
      // Another workspace's deployment is unknown here, as a made-up id.
      throw error instanceof AppError ? new AppError('not_found', `no deployment ${quoteValue(shortened(deploymentId))}`, { param: 'deploymentId', cause: error }) : error;
    });
    if (deployment.storageCredentialId === null) {
      throw new AppError('invalid_request', `deployment '${deployment.id}' has no bucket of its own (storageCredentialId); upload the weights with the Files API instead`, { param: 'deploymentId' });
    }
    if (key.length === 0 || key.length > 1024 || key.startsWith('/') || key.split('/').includes('..')) {
      throw new AppError('invalid_request', `bucketKey must be an object key of the bucket, got ${quoteValue(key)}`, { param: 'bucketKey' });
    }
    const store = await this.credentials.storeFor(workspaceId, deployment.storageCredentialId);
    try {
      const head = await store.head(key).catch(() => null);
      if (!head) throw new AppError('invalid_request', `bucketKey '${shortened(key)}' is not an object of the deployment's bucket`, { param: 'bucketKey' });
      this.checkSize(head.size, 'bucketKey');
      const object = await store.get(key);
      if (!object) throw new AppError('invalid_request', `bucketKey '${shortened(key)}' is not an object of the deployment's bucket`, { param: 'bucketKey' });
      return { bytes: object.data, sourceKind: 'BUCKET', sourceRef: key, field: 'bucketKey' };
    } finally {
      store.close?.();
    }
  }

  private checkSize(bytes: number, field: string): void {
    if (bytes > this.options.maxBytes) {
      throw new AppError('invalid_request', `the weights are ${bytes} bytes; adapters may be at most ${this.options.maxBytes} bytes (ADAPTER_MAX_BYTES)`, { param: field });
    }
  }
}

/** The file's facts, or a 400: naming `format` when the owner declared one the bytes are not, else the source. */
function inspect(bytes: Buffer, format: AdapterFormat, field: string, declared: boolean): AdapterFacts {
  try {
    return inspectAdapter(bytes, format as 'GGUF' | 'PEFT_TAR' | 'SAFETENSORS');
  } catch (error) {
    if (!(error instanceof AdapterFormatError)) throw error;
    throw new AppError('invalid_request', `the weights are not a valid ${format} LoRA adapter: ${error.message} (${error.field})`, { param: declared ? 'format' : field, cause: error });
  }
}

/** GGUF: its architecture is the base's (when the catalog names it); PEFT: its base_model_name_or_path, when present, is the base. */
function checkBase(facts: AdapterFacts, base: CatalogModel): void {
  if (facts.architecture !== null && base.architecture && facts.architecture !== base.architecture) {
    throw new AppError('invalid_request', `the adapter is for the ${quoteValue(facts.architecture)} architecture; baseModel '${base.id}' is ${quoteValue(base.architecture)}`, { param: 'baseModel' });
  }
  if (facts.baseModel !== null && facts.baseModel !== base.id && !facts.baseModel.endsWith(`/${base.id}`)) {
    throw new AppError('invalid_request', `the adapter was trained on ${quoteValue(facts.baseModel)} (adapter_config.json base_model_name_or_path), not baseModel '${base.id}'`, { param: 'baseModel' });
  }
}
