import { MigrationInterface, QueryRunner } from 'typeorm';

/** One-time links that sign a person into the console (printed by `npm start` on the embedded defaults). */
export class ConsoleSignInLinks1764700000000 implements MigrationInterface {
  name = 'ConsoleSignInLinks1764700000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      CREATE TABLE console_sign_in_links (
        id text PRIMARY KEY,
        workspace_id text NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
        token_hash text NOT NULL UNIQUE,
        created_at timestamptz NOT NULL DEFAULT now(),
        expires_at timestamptz NOT NULL,
        used_at timestamptz
      );
    `);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query('DROP TABLE console_sign_in_links');
  }
}
