import type { Catalog } from '../catalog/catalog';
import type { Batch, BatchError } from './batch.entities';
import type { BatchFiles } from './batch-files';
import { readInputFile } from './batch-input-file';
import type { BatchLineHandler } from './batch-line-handler';
import { responseLine } from './batch-results';
import type { BatchStore } from './batch-store';

export interface ValidationRules {
  readonly maxLines: number;
  readonly maxLineBytes: number;
}

/**
 * The `validating` step of a batch, run by whichever server leased it: read the input file,
 * check it (batch-input-file.ts), then store its lines and start it, or fail it with the
 * file's errors. Nothing is scheduled before the whole file passed.
 */
export class BatchValidator {
  constructor(
    private readonly store: Pick<BatchStore, 'startLines' | 'failValidation'>,
    private readonly files: Pick<BatchFiles, 'find' | 'read'>,
    private readonly catalog: Pick<Catalog, 'find'>,
    private readonly lines: Pick<BatchLineHandler, 'check'>,
    private readonly rules: ValidationRules,
  ) {}

  async validate(batch: Batch, owner: string): Promise<Batch | null> {
    const fail = (code: string, message: string, param: string | null = null) =>
      this.store.failValidation(batch.id, owner, [{ code, message, param, line: null }]);
    const model = this.catalog.find(batch.model);
    if (!model) return await fail('model_not_found', `the deployment's model '${batch.model}' is no longer in the catalog`);
    const file = await this.files.find(batch.workspaceId, batch.deploymentId, batch.inputFileId);
    const data = file ? await this.files.read(file) : null;
    if (!data) return await fail('file_not_found', `the input file '${batch.inputFileId}' was deleted before the batch read it`, 'input_file_id');
    const { lines, errors } = await readInputFile(data, {
      endpoint: batch.endpoint, modelId: batch.model, maxLines: this.rules.maxLines, maxLineBytes: this.rules.maxLineBytes,
      check: (body) => this.lines.check(batch.endpoint, model, body),
    });
    if (errors.length > 0) return await this.store.failValidation(batch.id, owner, errors as BatchError[]);
    // A body the endpoint refuses is answered now, with the endpoint's own 4xx: that line never runs.
    const refused = new Map<number, string>();
    for (const line of lines) if (!line.check.ok) refused.set(line.index, responseLine(line.customId, line.check.response));
    return await this.store.startLines(batch.id, owner, lines, refused);
  }
}
