import type { DeploymentStore } from '../deployments/deployment-store';
import type { Batch, BatchEnd, BatchFile } from './batch.entities';
import type { BatchFilePurge } from './batch-file-purge';
import type { BatchFiles } from './batch-files';
import type { BatchStore } from './batch-store';

/** Lines read per query while a batch's files are put together. */
const PAGE = 2_000;

/**
 * The last step of a batch, run by whichever server leased it once no line of it runs any more:
 * lines it never ran fail (`batch_expired`, `batch_cancelled`); the output file (answered 2xx,
 * in input order) and the error file (everything else, in input order) are written to the
 * object store, and the batch takes its terminal status with their ids (null for an empty
 * one, as OpenAI) and its webhook event in one transaction. A server that dies half-way leaves
 * at most unreferenced objects; the next one writes the files again. A batch of a deleted
 * deployment (cancelled by its deletion) ends the same way, with its counts, but no files.
 */
export class BatchFinalizer {
  constructor(
    private readonly store: Pick<BatchStore, 'failPendingLines' | 'results' | 'complete'>,
    private readonly files: Pick<BatchFiles, 'writeOutput' | 'insert' | 'discard'>,
    private readonly deployments: Pick<DeploymentStore, 'find'>,
    private readonly purge: Pick<BatchFilePurge, 'purge'>,
  ) {}

  async finalize(batch: Batch, owner: string): Promise<Batch | null> {
    const end: BatchEnd = batch.endStatus ?? (batch.status === 'cancelling' ? 'cancelled' : 'completed');
    if (end !== 'completed') await this.store.failPendingLines(batch.id, end === 'expired' ? 'batch_expired' : 'batch_cancelled');
    const deployment = await this.deployments.find(batch.deploymentId);
    // A deleted deployment's files are deleted with it (batch-deletion.ts): its batch ends with
    // its counts, but writes no files that would be deleted at once.
    const keepsFiles = deployment !== null && deployment.status !== 'Deleted';
    // Each page of lines becomes one part of its file: a million lines are never joined into
    // one string (hundreds of ms with the event loop held) nor one buffer.
    const outputs: Buffer[] = [];
    const errors: Buffer[] = [];
    for (let after = -1; keepsFiles;) {
      const page = await this.store.results(batch.id, after, PAGE);
      const answered: string[] = [];
      const failed: string[] = [];
      for (const line of page) {
        if (line.result === null) continue;
        (line.status === 'succeeded' ? answered : failed).push(line.result);
      }
      if (answered.length > 0) outputs.push(Buffer.from(`${answered.join('\n')}\n`));
      if (failed.length > 0) errors.push(Buffer.from(`${failed.join('\n')}\n`));
      if (page.length < PAGE) break;
      after = page[page.length - 1].lineIndex;
    }
    const target = { id: batch.deploymentId, workspaceId: batch.workspaceId, storageCredentialId: deployment?.storageCredentialId ?? null };
    const written: BatchFile[] = [];
    const write = async (parts: Buffer[], name: string): Promise<string | null> => {
      if (parts.length === 0) return null;
      const file = await this.files.writeOutput(target, batch.id, `${batch.id}_${name}.jsonl`, parts);
      written.push(file);
      return file.id;
    };
    try {
      const outputFileId = await write(outputs, 'output');
      const errorFileId = await write(errors, 'error');
      const ended = await this.store.complete(batch.id, owner, end, { outputFileId, errorFileId }, (manager) => this.files.insert(manager, written));
      if (!ended) await this.files.discard(written);
      // Its input, if its owner deleted it while the batch read it, can go now.
      else await this.purge.purge({ fileIds: [batch.inputFileId] });
      return ended;
    } catch (error) {
      await this.files.discard(written);
      throw error;
    }
  }
}
