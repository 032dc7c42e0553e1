import { DataSource } from 'typeorm';
import { MIGRATIONS, openDatabase } from '../../control-plane/data-source';
import { UsageSharedModel1765500000000 } from '../../control-plane/database/migrations/1765500000000-usage-shared-model';
import { createTestDatabase, dropTestDatabase } from '../support/test-database';

/** Guests' usage records written before `shared_model`: the model moves to its column, deployment_id becomes unknown, and back. */
describe('usage shared_model migration', () => {
  it('moves a guest record\'s shared/<model-id> out of deployment_id, leaves owners\' records, requires one of the two, and rolls back', async () => {
    const url = await createTestDatabase();
    const before = new DataSource({ type: 'postgres', url, migrations: MIGRATIONS.slice(0, MIGRATIONS.indexOf(UsageSharedModel1765500000000)) });
    await before.initialize();
    await before.runMigrations({ transaction: 'all' });
    const row = (key: string, deploymentId: string) =>
      `('ws_1', '${key}', '${deploymentId}', 'chat.completions', 'succeeded', false, 1, 2, 3, 4, now())`;
    await before.query(`
      INSERT INTO usage_records (workspace_id, api_key_id, deployment_id, endpoint, status, stream, prompt_tokens, completion_tokens, total_tokens, latency_ms, created_at)
      VALUES ${row('key_owner', 'dep_own')}, ${row('key_guest', 'shared/acme/chat-8b')}`);
    await before.destroy();

    const dataSource = await openDatabase(url);
    const records = async (columns: string) => await dataSource.query(`SELECT api_key_id, ${columns} FROM usage_records ORDER BY api_key_id`);
    try {
      expect(await records('deployment_id, shared_model')).toEqual([
        { api_key_id: 'key_guest', deployment_id: null, shared_model: 'shared/acme/chat-8b' },
        { api_key_id: 'key_owner', deployment_id: 'dep_own', shared_model: null },
      ]);
      await expect(dataSource.query(`
        INSERT INTO usage_records (workspace_id, api_key_id, endpoint, status, stream, prompt_tokens, completion_tokens, total_tokens, latency_ms, created_at)
        VALUES ('ws_1', 'key_none', 'chat.completions', 'succeeded', false, 1, 2, 3, 4, now())`)).rejects.toThrow(/usage_records_served_by/);
      // A guest record written from now on: the owner's deployment and the shared model.
      await dataSource.query(`
        INSERT INTO usage_records (workspace_id, api_key_id, deployment_id, shared_model, endpoint, status, stream, prompt_tokens, completion_tokens, total_tokens, latency_ms, created_at)
        VALUES ('ws_1', 'key_new_guest', 'dep_provider', 'shared/acme/chat-8b', 'chat.completions', 'succeeded', false, 1, 2, 3, 4, now())`);

      // Undone back to before it (later migrations first: it need not be the last one).
      for (let undo = MIGRATIONS.length - MIGRATIONS.indexOf(UsageSharedModel1765500000000); undo > 0; undo--) await dataSource.undoLastMigration({ transaction: 'all' });
      expect(await records('deployment_id')).toEqual([
        { api_key_id: 'key_guest', deployment_id: 'shared/acme/chat-8b' },
        { api_key_id: 'key_new_guest', deployment_id: 'shared/acme/chat-8b' },
        { api_key_id: 'key_owner', deployment_id: 'dep_own' },
      ]);
      await dataSource.runMigrations({ transaction: 'all' });
      expect((await records('deployment_id, shared_model')).map((record: { deployment_id: string | null }) => record.deployment_id)).toEqual([null, null, 'dep_own']);
    } finally {
      await dataSource.destroy();
      await dropTestDatabase(url);
    }
  });
});
