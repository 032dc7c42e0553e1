import type { Logger } from 'pino';
import type { BatchDeletion } from './batch-deletion';
import type { BatchFilePurge } from './batch-file-purge';
import type { BatchFinalizer } from './batch-finalizer';
import type { BatchStore } from './batch-store';
import type { BatchValidator } from './batch-validator';
import type { FileUploads } from './file-uploads';
import { withoutContent } from './without-content';

export interface BatchUpkeepParts {
  readonly store: BatchStore;
  readonly validator: Pick<BatchValidator, 'validate'>;
  readonly finalizer: Pick<BatchFinalizer, 'finalize'>;
  readonly purge: Pick<BatchFilePurge, 'purge'>;
  readonly deletion: Pick<BatchDeletion, 'finishDeletions'>;
  /** Spent upload links' claims, removed once they expire (file-uploads.ts). */
  readonly uploads?: Pick<FileUploads, 'sweep'>;
}

/** Every this many sweeps, the catch-all for deletions looks at the files table too (a scan: not every 2 s). */
const FILE_CATCH_ALL_SWEEPS = 30;

/**
 * The work around a batch's lines, on every server: validating new batches, finalizing ended
 * ones, and the sweep that re-queues dead servers' lines and expires overdue batches. Each runs
 * one at a time on this server; a claim (leased, like a line's) keeps two servers from doing the
 * same batch. The runner (batch-runner.ts) calls these when a batch changes and on its timers.
 */
export class BatchUpkeep {
  private sweeping: Promise<void> | null = null;
  private validating: Promise<void> | null = null;
  private finalizing: Promise<void> | null = null;
  private finalizeAgain = false;
  private stopped = false;
  private sweeps = 0;

  constructor(private readonly parts: BatchUpkeepParts, private readonly owner: string, private readonly leaseMs: number, private readonly logger: Logger) {}

  /** Starts nothing more and waits for what runs. */
  async stop(): Promise<void> {
    this.stopped = true;
    await Promise.all([this.sweeping, this.validating, this.finalizing]);
  }

  /**
   * The safety net: lines of dead servers re-queued, overdue batches expired, ended batches
   * finalized, deleted files purged, and what a deletion that stopped half-way left finished.
   */
  sweep(): Promise<void> {
    if (this.sweeping || this.stopped) return this.sweeping ?? Promise.resolve();
    this.sweeping = (async () => {
      const { store } = this.parts;
      try {
        for (const batchId of await store.recoverLostLines()) await store.announce(batchId);
        await store.expireOverdue();
        await store.finishAllDone();
        const catchAll = this.sweeps++ % FILE_CATCH_ALL_SWEEPS === 0;
        await this.parts.deletion.finishDeletions(catchAll);
        if (catchAll) await this.parts.uploads?.sweep();
        await this.finalizeDue();
        await this.parts.purge.purge();
      } catch (error) {
        this.logger.error({ err: error }, 'batch sweep failed');
      } finally {
        this.sweeping = null;
      }
    })();
    return this.sweeping;
  }

  /** Validates `validating` batches nobody else does, one at a time. */
  validateDue(): Promise<void> {
    if (this.validating || this.stopped) return this.validating ?? Promise.resolve();
    this.validating = (async () => {
      const { store, validator } = this.parts;
      try {
        for (let batch = await store.claimValidation(this.owner, this.leaseMs); batch && !this.stopped;
          batch = await store.claimValidation(this.owner, this.leaseMs)) {
          try {
            await validator.validate(batch, this.owner);
          } catch (error) {
            // A file that cannot be read at all is not retried forever: the batch fails, saying so.
            this.logger.error({ err: withoutContent(error), batchId: batch.id }, 'batch validation failed unexpectedly');
            await store.failValidation(batch.id, this.owner, [{ code: 'validation_error', message: 'the input file could not be read; create the batch again', param: null, line: null }]);
          }
        }
      } catch (error) {
        this.logger.error({ err: error }, 'claiming batches to validate failed');
      } finally {
        this.validating = null;
      }
    })();
    return this.validating;
  }

  /** Finalizes ended batches none of whose lines still runs, one at a time; asked again while it runs, it goes round once more. */
  finalizeDue(): Promise<void> {
    if (this.finalizing) {
      this.finalizeAgain = true;
      return this.finalizing;
    }
    if (this.stopped) return Promise.resolve();
    this.finalizing = (async () => {
      const { store, finalizer } = this.parts;
      try {
        do {
          this.finalizeAgain = false;
          for (let batch = await store.claimFinalization(this.owner, this.leaseMs); batch && !this.stopped;
            batch = await store.claimFinalization(this.owner, this.leaseMs)) {
            try {
              await finalizer.finalize(batch, this.owner);
            } catch (error) {
              // Its lease lapses and a later sweep (here or elsewhere) tries again.
              this.logger.error({ err: withoutContent(error), batchId: batch.id }, 'batch finalization failed; it will be retried');
              break;
            }
          }
        } while (this.finalizeAgain && !this.stopped);
      } catch (error) {
        this.logger.error({ err: error }, 'claiming batches to finalize failed');
      } finally {
        this.finalizing = null;
      }
    })();
    return this.finalizing;
  }
}
