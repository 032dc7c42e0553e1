import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * A guest's usage record names what served it in two columns: `deployment_id`, the owner's
 * deployment that ran the request (a deployment id, as on every other record), and
 * `shared_model`, the shared model the guest called (`shared/<model-id>`; null on an owner's
 * own records). A guest's records used to hold `shared/<model-id>` in `deployment_id`, and the
 * deployment that served them was not recorded anywhere in the row: those rows get the model in
 * `shared_model` and a null `deployment_id` (unknown), rather than a value that is not a
 * deployment id. Every row names at least one of the two. Down puts the shared model back into
 * `deployment_id` of every guest row, the old shape (which has no place for the deployment that
 * served a guest record written since: that is lost).
 */
export class UsageSharedModel1765500000000 implements MigrationInterface {
  name = 'UsageSharedModel1765500000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      ALTER TABLE usage_records ADD COLUMN shared_model text, ALTER COLUMN deployment_id DROP NOT NULL;
      UPDATE usage_records SET shared_model = deployment_id, deployment_id = NULL WHERE deployment_id LIKE 'shared/%';
      ALTER TABLE usage_records ADD CONSTRAINT usage_records_served_by CHECK (deployment_id IS NOT NULL OR shared_model IS NOT NULL);
    `);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      ALTER TABLE usage_records DROP CONSTRAINT usage_records_served_by;
      UPDATE usage_records SET deployment_id = shared_model WHERE shared_model IS NOT NULL;
      ALTER TABLE usage_records ALTER COLUMN deployment_id SET NOT NULL, DROP COLUMN shared_model;
    `);
  }
}
