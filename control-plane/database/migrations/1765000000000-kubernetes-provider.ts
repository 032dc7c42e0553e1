import { MigrationInterface, QueryRunner } from 'typeorm';

/** Deployments may run on the `kubernetes` provider (replicas as pods of a cluster). */
export class KubernetesProvider1765000000000 implements MigrationInterface {
  name = 'KubernetesProvider1765000000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      ALTER TABLE deployments DROP CONSTRAINT IF EXISTS deployments_provider_check;
      ALTER TABLE deployments ADD CONSTRAINT deployments_provider_check CHECK (provider IN ('local', 'external', 'static', 'market', 'kubernetes'));
    `);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      ALTER TABLE deployments DROP CONSTRAINT deployments_provider_check;
      ALTER TABLE deployments ADD CONSTRAINT deployments_provider_check CHECK (provider IN ('local', 'external', 'static', 'market'));
    `);
  }
}
