import { Client } from 'pg';

/** One query on the test database over its own connection (the server under test may be dead). */
export async function query<Row = Record<string, unknown>>(databaseUrl: string, sql: string, parameters: unknown[] = []): Promise<Row[]> {
  const client = new Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    return (await client.query(sql, parameters)).rows as Row[];
  } finally {
    await client.end();
  }
}
