import { createHash } from 'node:crypto';
import type { DataSource } from 'typeorm';
import { parseJsonText } from '../../common/json-nesting';
import type { BatchEndpoint, BatchError } from './batch.entities';

/** Bumped when the file rules change, so a failure remembered under the old ones is not reused. */
const RULES_VERSION = 1;

/** What a file's validation depends on besides its bytes. */
export interface CheckedRules {
  readonly endpoint: BatchEndpoint;
  readonly modelId: string;
  readonly maxLines: number;
  readonly maxLineBytes: number;
  /** A file refused for naming an adapter not attached then may pass once it is: the names are part of the rules. */
  readonly adapterNames?: ReadonlySet<string>;
}

/**
 * Why a file failed validation, remembered by file and rules (`batch_file_checks`): a new batch
 * of a file that failed under the same rules fails at once with the same errors, without reading
 * the file again. Each batch made of a hostile file used to pay its whole validation again.
 * Only files in the managed store are remembered: their objects are written once under a new
 * id and never change, so the id stands for the bytes (a customer's bucket could change them).
 * A valid file is read again by each batch: its lines must be stored for that batch, and that
 * reading costs less than running them.
 */
export class BatchFileChecks {
  constructor(private readonly dataSource: DataSource) {}

  async failure(fileId: string, rules: CheckedRules): Promise<BatchError[] | null> {
    const [row] = await this.dataSource.query('SELECT errors FROM batch_file_checks WHERE file_id = $1 AND rules = $2', [fileId, key(rules)]);
    return row ? parseJsonText(row.errors as string) as BatchError[] : null;
  }

  async rememberFailure(fileId: string, rules: CheckedRules, errors: BatchError[]): Promise<void> {
    await this.dataSource.query(`
      INSERT INTO batch_file_checks (file_id, rules, errors) SELECT $1, $2, $3 WHERE EXISTS (SELECT 1 FROM batch_files WHERE id = $1)
      ON CONFLICT (file_id, rules) DO UPDATE SET errors = EXCLUDED.errors, checked_at = clock_timestamp()`, [fileId, key(rules), JSON.stringify(errors)]);
  }
}

function key(rules: CheckedRules): string {
  const fields: unknown[] = [RULES_VERSION, rules.endpoint, rules.modelId, rules.maxLines, rules.maxLineBytes];
  // Hashed (a deployment may have hundreds attached); absent when none, so keys remembered before adapters still match.
  if (rules.adapterNames && rules.adapterNames.size > 0) {
    fields.push(createHash('sha256').update(JSON.stringify([...rules.adapterNames].sort())).digest('base64url'));
  }
  return JSON.stringify(fields);
}
