import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * A batch's lines refer to its input file instead of copying it: each line keeps where its
 * body lies in the file (the runner reads it from the object store), so one reused 61 MB file
 * no longer added 61 MB to the database per batch. Lines stored before keep their body until
 * they end; the bodies of lines that already ended are dropped here (nothing reads them).
 *
 * Files are deleted in two steps: `deleted_at` hides a file from its owner at once; the row and
 * the object go once no unfinished batch reads it (`batches_input_file` finds those). A file
 * whose validation failed remembers why (`batch_file_checks`), so a new batch of the same file
 * fails at once instead of reading it all again.
 */
export class BatchInputsInFiles1765200000000 implements MigrationInterface {
  name = 'BatchInputsInFiles1765200000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      ALTER TABLE batch_lines ALTER COLUMN body DROP NOT NULL;
      ALTER TABLE batch_lines ADD COLUMN body_offset bigint, ADD COLUMN body_length integer;
      ALTER TABLE batch_lines ADD CONSTRAINT batch_lines_body_span CHECK (
        (body_offset IS NULL) = (body_length IS NULL) AND (body_offset IS NULL OR (body_offset >= 0 AND body_length >= 0)));
      UPDATE batch_lines SET body = NULL WHERE status IN ('succeeded', 'failed') AND body IS NOT NULL;

      ALTER TABLE batch_files ADD COLUMN deleted_at timestamptz;
      CREATE INDEX batch_files_deleted ON batch_files (deleted_at) WHERE deleted_at IS NOT NULL;
      CREATE INDEX batches_input_file ON batches (input_file_id) WHERE status IN ('validating', 'in_progress', 'finalizing', 'cancelling');

      CREATE TABLE batch_file_checks (
        file_id text NOT NULL REFERENCES batch_files(id) ON DELETE CASCADE,
        rules text NOT NULL,
        errors text NOT NULL,
        checked_at timestamptz NOT NULL DEFAULT clock_timestamp(),
        PRIMARY KEY (file_id, rules)
      );
    `);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      DROP TABLE batch_file_checks;
      DROP INDEX batches_input_file;
      DROP INDEX batch_files_deleted;
      DELETE FROM batch_files WHERE deleted_at IS NOT NULL;
      ALTER TABLE batch_files DROP COLUMN deleted_at;
      -- Lines that refer to their file cannot get their bodies back here: they keep an empty one.
      UPDATE batch_lines SET body = '' WHERE body IS NULL;
      ALTER TABLE batch_lines DROP CONSTRAINT batch_lines_body_span;
      ALTER TABLE batch_lines DROP COLUMN body_offset, DROP COLUMN body_length;
      ALTER TABLE batch_lines ALTER COLUMN body SET NOT NULL;
    `);
  }
}
