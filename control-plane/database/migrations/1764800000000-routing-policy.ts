import { MigrationInterface, QueryRunner } from 'typeorm';

/** Each deployment's routing policy (engine-aware routing): prefix-aware unless its owner chose otherwise. */
export class RoutingPolicy1764800000000 implements MigrationInterface {
  name = 'RoutingPolicy1764800000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      ALTER TABLE deployments ADD COLUMN routing_policy text NOT NULL DEFAULT 'prefix-aware'
        CHECK (routing_policy IN ('prefix-aware', 'least-loaded', 'round-robin'))
    `);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query('ALTER TABLE deployments DROP COLUMN routing_policy');
  }
}
