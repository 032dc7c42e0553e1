import { DataSource } from 'typeorm';
import { MIGRATIONS, openDatabase } from '../../control-plane/data-source';
import { WorkspacesAndLedger1764500000000 } from '../../control-plane/database/migrations/1764500000000-workspaces-and-ledger';
import { createTestDatabase, dropTestDatabase } from '../support/test-database';

/** The signed, kinded ledger on a database that already has balances and GPU-time rows. */
describe('ledger migration', () => {
  it('negates GPU time, adds opening rows so balances equal their rows, and rolls back', async () => {
    const url = await createTestDatabase();
    const before = new DataSource({ type: 'postgres', url, migrations: MIGRATIONS.slice(0, MIGRATIONS.indexOf(WorkspacesAndLedger1764500000000)) });
    await before.initialize();
    await before.runMigrations({ transaction: 'all' });
    await before.query(`
      INSERT INTO workspaces (id, name, credit_balance) VALUES
        ('ws_prepaid', 'p', 7.5), ('ws_postpaid', 'q', NULL), ('ws_empty', 'r', 0), ('ws_even', 's', -2), ('ws_tiny', 't', 0.0000000001);
      INSERT INTO billing_ledger (workspace_id, deployment_id, replica_id, period_start, period_end, price_per_hour, amount) VALUES
        ('ws_prepaid', 'dep_1', 'rep_1', now() - interval '2 hours', now() - interval '1 hour', 1.25, 1.25),
        ('ws_prepaid', 'dep_1', 'rep_1', now() - interval '1 hour', now() - interval '48 minutes', 1.25, 0.25),
        ('ws_postpaid', 'dep_2', 'rep_2', now() - interval '1 hour', now(), 0.1, 0.1),
        ('ws_even', 'dep_3', 'rep_3', now() - interval '1 hour', now(), 2, 2),
        ('ws_tiny', 'dep_4', 'rep_4', now() - interval '1 second', now(), 0.0001, 0.0000000277);
    `);
    await before.destroy();

    const dataSource = await openDatabase(url);
    const ledger = async () => await dataSource.query('SELECT workspace_id, kind, amount::text FROM billing_ledger ORDER BY workspace_id, id');
    try {
      expect(await ledger()).toEqual([
        { workspace_id: 'ws_even', kind: 'gpu_time', amount: '-2.0000000000' },
        { workspace_id: 'ws_postpaid', kind: 'gpu_time', amount: '-0.1000000000' },
        { workspace_id: 'ws_prepaid', kind: 'gpu_time', amount: '-1.2500000000' },
        { workspace_id: 'ws_prepaid', kind: 'gpu_time', amount: '-0.2500000000' },
        { workspace_id: 'ws_prepaid', kind: 'opening_balance', amount: '9.0000000000' },
        { workspace_id: 'ws_tiny', kind: 'gpu_time', amount: '-0.0000000277' },
        { workspace_id: 'ws_tiny', kind: 'opening_balance', amount: '0.0000000278' },
      ]);
      const books = await dataSource.query(`
        SELECT w.id, w.credit_balance = coalesce(sum(l.amount), 0) AS equal FROM workspaces w LEFT JOIN billing_ledger l ON l.workspace_id = w.id
        WHERE w.credit_balance IS NOT NULL GROUP BY w.id ORDER BY w.id`);
      expect(books).toEqual(['ws_empty', 'ws_even', 'ws_prepaid', 'ws_tiny'].map((id) => ({ id, equal: true })));
      // The new kinds' rules hold from now on: a GPU row charging a positive amount, a guest row without its request, a kind not in the list.
      for (const bad of [
        `INSERT INTO billing_ledger (workspace_id, kind, deployment_id, replica_id, period_start, period_end, price_per_hour, amount) VALUES ('ws_even', 'gpu_time', 'd', 'r', now(), now(), 1, 1)`,
        `INSERT INTO billing_ledger (workspace_id, kind, model_id, prompt_tokens, completion_tokens, amount) VALUES ('ws_even', 'guest_debit', 'm', 1, 1, -1)`,
        `INSERT INTO billing_ledger (workspace_id, kind, amount) VALUES ('ws_even', 'refund', 1)`,
        `INSERT INTO billing_ledger (workspace_id, kind, amount) VALUES ('ws_even', 'top_up', 0)`,
      ]) await expect(dataSource.query(bad)).rejects.toThrow(/billing_ledger_kind_check/);

      // Back to before the ledger migration (later migrations first).
      for (let count = MIGRATIONS.length - MIGRATIONS.indexOf(WorkspacesAndLedger1764500000000); count > 0; count--) {
        await dataSource.undoLastMigration({ transaction: 'all' });
      }
      expect(await dataSource.query('SELECT workspace_id, amount::text FROM billing_ledger ORDER BY workspace_id, id')).toEqual([
        { workspace_id: 'ws_even', amount: '2.0000000000' },
        { workspace_id: 'ws_postpaid', amount: '0.1000000000' },
        { workspace_id: 'ws_prepaid', amount: '1.2500000000' },
        { workspace_id: 'ws_prepaid', amount: '0.2500000000' },
        { workspace_id: 'ws_tiny', amount: '0.0000000277' },
      ]);
      await dataSource.runMigrations({ transaction: 'all' });
      expect((await ledger()).filter((row: { kind: string }) => row.kind === 'opening_balance')).toHaveLength(2);
    } finally {
      await dataSource.destroy();
      await dropTestDatabase(url);
    }
  });
});
