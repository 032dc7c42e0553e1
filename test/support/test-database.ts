import { randomBytes } from 'node:crypto';
import { Client } from 'pg';
import type { DataSource } from 'typeorm';
import { openDatabase } from '../../control-plane/data-source';
import { openForSuite } from './suite';

/** A fresh, empty database on the run's PostgreSQL (see global-setup.ts); returns its URL. */
export async function createTestDatabase(): Promise<string> {
  const adminUrl = process.env.TEST_PG_ADMIN_URL;
  if (!adminUrl) throw new Error('TEST_PG_ADMIN_URL is not set: run tests through jest (global-setup starts PostgreSQL)');
  const name = `t_${randomBytes(6).toString('hex')}`;
  const admin = new Client({ connectionString: adminUrl });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE ${name}`);
  } finally {
    await admin.end();
  }
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  return url.toString();
}

export async function dropTestDatabase(databaseUrl: string): Promise<void> {
  const name = new URL(databaseUrl).pathname.slice(1);
  const admin = new Client({ connectionString: process.env.TEST_PG_ADMIN_URL });
  await admin.connect();
  try {
    await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
  } finally {
    await admin.end();
  }
}

export interface TestDataSource {
  databaseUrl: string;
  /** Open on the database, its migrations run. */
  dataSource: DataSource;
}

/**
 * A fresh database with the platform's schema, for a describe block (openForSuite): created and
 * opened in its beforeAll; destroyed (unless a test already did) and dropped in its afterAll.
 */
export function dataSourceForSuite(): TestDataSource {
  return openForSuite(async () => {
    const databaseUrl = await createTestDatabase();
    return { databaseUrl, dataSource: await openDatabase(databaseUrl) };
  }, async ({ databaseUrl, dataSource }) => {
    if (dataSource.isInitialized) await dataSource.destroy();
    await dropTestDatabase(databaseUrl);
  });
}
