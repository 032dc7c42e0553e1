import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Several servers on one database: each registers itself (the address peers relay jobs to,
 * and the load of the replicas whose agents it holds), replicas record which server holds
 * their agent's stream, and one relay token lets servers call each other.
 */
export class ClusterServers1764600000000 implements MigrationInterface {
  name = 'ClusterServers1764600000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      CREATE TABLE servers (
        id text PRIMARY KEY,
        relay_address text NOT NULL,
        started_at timestamptz NOT NULL DEFAULT now(),
        last_seen_at timestamptz NOT NULL DEFAULT now(),
        load jsonb NOT NULL DEFAULT '{}'
      );
      CREATE TABLE cluster_settings (
        name text PRIMARY KEY,
        value text NOT NULL
      );
      ALTER TABLE replicas ADD COLUMN server_id text;
      CREATE INDEX replicas_server ON replicas (server_id) WHERE status <> 'Terminated';
    `);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      DROP INDEX replicas_server;
      ALTER TABLE replicas DROP COLUMN server_id;
      DROP TABLE cluster_settings;
      DROP TABLE servers;
    `);
  }
}
