import { MIGRATIONS, openDatabase } from '../../control-plane/data-source';
import { createTestDatabase, dropTestDatabase } from '../support/test-database';

/** Every checked-in migration rolls back to an empty schema and forward again. */
describe('migrations', () => {
  it('undo one by one to nothing, then run again', async () => {
    const url = await createTestDatabase();
    const dataSource = await openDatabase(url);
    const tables = async () => (await dataSource.query(
      `SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' AND table_name <> 'migrations' ORDER BY table_name`,
    )).map((row: { table_name: string }) => row.table_name);
    try {
      const migrated = await tables();
      expect(migrated).toEqual(expect.arrayContaining(['request_records', 'storage_credentials', 'deployments', 'api_keys']));
      for (let index = 0; index < MIGRATIONS.length; index++) await dataSource.undoLastMigration({ transaction: 'all' });
      expect(await tables()).toEqual([]);
      await dataSource.runMigrations({ transaction: 'all' });
      expect(await tables()).toEqual(migrated);
    } finally {
      await dataSource.destroy();
      await dropTestDatabase(url);
    }
  });
});
