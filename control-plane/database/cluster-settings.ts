import type { DataSource } from 'typeorm';

/**
 * A value every server of a cluster must agree on (servers share only PostgreSQL): the first
 * server to start writes its `candidate`, every server (that one included) reads back what won.
 * `cluster_settings` is plain text: hold there only what the database's readers may see (the
 * operator), never a tenant.
 */
export async function clusterSetting(dataSource: Pick<DataSource, 'query'>, name: string, candidate: string): Promise<string> {
  await dataSource.query(`INSERT INTO cluster_settings (name, value) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING`, [name, candidate]);
  const [row] = await dataSource.query(`SELECT value FROM cluster_settings WHERE name = $1`, [name]);
  return row.value;
}
