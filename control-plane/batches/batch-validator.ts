import type { Catalog } from '../catalog/catalog';
import type { AdapterAddressing } from '../pipeline/adapter-addressing';
import type { Batch, BatchError } from './batch.entities';
import type { BatchFileChecks } from './batch-file-checks';
import type { BatchFiles } from './batch-files';
import { readInputFile } from './batch-input-file';
import type { BatchLineHandler } from './batch-line-handler';
import { responseLine } from './batch-results';
import type { BatchStore } from './batch-store';
import { WorkSlices } from './work-slices';

export interface ValidationRules {
  readonly maxLines: number;
  readonly maxLineBytes: number;
}

/** How validation shared the event loop, over every file this server validated (tests and measurements read it). */
export interface ValidationSlices {
  validations: number;
  /** Turns given to the event loop mid-file. */
  yields: number;
  /** The longest stretch of validation work between two turns, in ms. */
  longestSliceMs: number;
}

/**
 * The `validating` step of a batch, run by whichever server leased it: read the input file,
 * check it (batch-input-file.ts), then store its lines and start it, or fail it with the
 * file's errors. Nothing is scheduled before the whole file passed. The file is streamed from
 * the object store and checked in time slices (work-slices.ts), so a large or hostile file
 * never holds the event loop for more than a slice; a file that failed before under the same
 * rules fails again without being read (batch-file-checks.ts).
 */
export class BatchValidator {
  readonly slices: ValidationSlices = { validations: 0, yields: 0, longestSliceMs: 0 };

  constructor(
    private readonly store: Pick<BatchStore, 'startLines' | 'failValidation'>,
    private readonly files: Pick<BatchFiles, 'inputOf' | 'open'>,
    private readonly checks: Pick<BatchFileChecks, 'failure' | 'rememberFailure'>,
    private readonly catalog: Pick<Catalog, 'find'>,
    private readonly lines: Pick<BatchLineHandler, 'check'>,
    private readonly rules: ValidationRules,
    private readonly newSlices: () => WorkSlices = () => new WorkSlices(),
    /** Lines may name the workspace's adapters attached to the deployment (docs/adapters.md#addressing); absent: only the base model. */
    private readonly adapters: Pick<AdapterAddressing, 'namesOn'> | null = null,
  ) {}

  async validate(batch: Batch, owner: string): Promise<Batch | null> {
    const fail = (code: string, message: string, param: string | null = null) =>
      this.store.failValidation(batch.id, owner, [{ code, message, param, line: null }]);
    const model = this.catalog.find(batch.model);
    if (!model) return await fail('model_not_found', `the deployment's model '${batch.model}' is no longer in the catalog`);
    const fileGone = () => fail('file_not_found', `the input file '${batch.inputFileId}' was deleted before the batch read it`, 'input_file_id');
    const file = await this.files.inputOf(batch);
    if (!file) return await fileGone();
    // Embeddings take no adapter (as live): there an adapter's name fails as any other model.
    const adapterNames = this.adapters && batch.endpoint !== '/v1/embeddings' ? await this.adapters.namesOn(batch.workspaceId, batch.deploymentId) : undefined;
    const rules = { endpoint: batch.endpoint, modelId: model.id, adapterNames, maxLines: this.rules.maxLines, maxLineBytes: this.rules.maxLineBytes };
    const remembered = file.storageCredentialId === null ? await this.checks.failure(file.id, rules) : null;
    if (remembered) return await this.store.failValidation(batch.id, owner, remembered);
    const opened = await this.files.open(file);
    if (!opened) return await fileGone();
    const slices = this.newSlices();
    let result;
    try {
      result = await readInputFile(opened.stream, { ...rules, check: (body) => this.lines.check(batch.endpoint, model, body) }, slices);
    } finally {
      opened.stream.destroy();
      this.slices.validations++;
      this.slices.yields += slices.yields;
      this.slices.longestSliceMs = Math.max(this.slices.longestSliceMs, slices.longestSliceMs);
    }
    if (result.errors.length > 0) {
      if (file.storageCredentialId === null) await this.checks.rememberFailure(file.id, rules, result.errors as BatchError[]);
      return await this.store.failValidation(batch.id, owner, result.errors as BatchError[]);
    }
    // A body the endpoint refuses is answered now, with the endpoint's own 4xx: that line never runs.
    const refused = new Map<number, string>();
    for (const [index, { customId, response }] of result.lines.refused) refused.set(index, responseLine(customId, response));
    return await this.store.startLines(batch.id, owner, result.lines, refused);
  }
}
