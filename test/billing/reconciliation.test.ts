import pino from 'pino';
import { GuestCredit } from '../../control-plane/billing/guest-credit';
import { topUp } from '../../control-plane/billing/top-up';
import { Metering } from '../../control-plane/billing/metering';
import { canonicalMoney } from '../../control-plane/billing/money';
import { SharedBilling, type SettlementItem, type TokenPrices } from '../../control-plane/billing/shared-billing';
import { openBillingDatabase } from './support/billing-database';
import { openForSuite } from '../support/suite';

const MODELS: Record<string, TokenPrices> = {
  'org/cheap': { inputPerMillion: '0.18', outputPerMillion: '0.18' },
  'org/big': { inputPerMillion: '2.5', outputPerMillion: '10.0001' },
};
const RUN_MS = 2_500;

/**
 * Everything that moves money at once — guest requests held against two servers' credit leases
 * (billing/guest-credit.ts, as shared serving holds them), settled in their batches (some written
 * again) or released, metering passes over running replicas, a replica leaving Running, top-ups,
 * and a postpaid workspace becoming prepaid mid-run — and afterwards the books balance exactly.
 */
describe('ledger reconciliation under concurrency', () => {
  const database = openForSuite(() => openBillingDatabase(), (opened) => opened.close());

  it('every prepaid balance equals its ledger rows, guests never go below zero, debits mirror credits, and each cost is tokens × prices', async () => {
    const { dataSource } = database;
    const silent = pino({ level: 'silent' });
    const metering = new Metering(dataSource, { intervalMs: 3_600_000 }, silent);
    const shared = new SharedBilling(dataSource);
    // Two servers, each settling every 20 ms and giving an idle lease back after 50 ms.
    const servers = ['srv_a', 'srv_b'].map((id) => new GuestCredit(new SharedBilling(dataSource), id, null, silent, {
      settleIntervalMs: 20, leaseTtlMs: 60_000, leaseIdleMs: 50, leaseRequests: 4,
    }));
    for (const credit of servers) credit.start();
    // Guests only (their balance can only fall through guest debits), owners with GPU time, and postpaid ones.
    const guestOnly = [await database.workspace('2'), await database.workspace('0.35'), await database.workspace('0.0001')];
    const ownerPrepaid = await database.workspace('5');
    const ownerEmpty = await database.workspace('0');
    const ownerPostpaid = await database.workspace();
    const becomesPrepaid = await database.workspace();
    const owners = [ownerPrepaid, ownerEmpty, ownerPostpaid];
    const guests = [...guestOnly, ownerPrepaid, becomesPrepaid];
    await database.runningReplica(ownerPrepaid, '3.6', 30);
    await database.runningReplica(ownerPrepaid, '1.2345', 5);
    const stopping = await database.runningReplica(ownerPostpaid, '2', 10);
    await database.runningReplica(becomesPrepaid, '0.5', 20);
    await database.runningReplica(ownerEmpty, '7.77', 1);

    const deadline = Date.now() + RUN_MS;
    const outcomes = { settled: 0, released: 0, refused: 0, resettled: 0 };
    let sequence = 0;
    const pick = <T>(list: T[]): T => list[Math.floor(Math.random() * list.length)];
    const guestWorker = async () => {
      while (Date.now() < deadline) {
        const modelId = pick(Object.keys(MODELS));
        const prices = MODELS[modelId];
        const guest = pick(guests);
        const credit = pick(servers);
        const maxPrompt = 1 + Math.floor(Math.random() * 20_000);
        const maxCompletion = Math.floor(Math.random() * 5_000);
        const reservation = await credit.reserve(guest, maxPrompt, maxCompletion, prices, 60_000);
        if (!reservation) {
          outcomes.refused++;
          await new Promise((resolve) => setTimeout(resolve, 5));
          continue;
        }
        await new Promise((resolve) => setTimeout(resolve, Math.random() * 10));
        if (Math.random() < 0.25) {
          credit.release(reservation);
          outcomes.released++;
          continue;
        }
        const usage = {
          sharedRequestId: `shr_${++sequence}`, ownerWorkspaceId: pick(owners), deploymentId: 'dep_shared', modelId,
          promptTokens: Math.floor(Math.random() * (maxPrompt + 1)), completionTokens: Math.floor(Math.random() * (maxCompletion + 1)),
        };
        credit.settle(reservation, usage, prices);
        outcomes.settled++;
        if (Math.random() < 0.1) {
          // Written again once its batch is in (as a batch retried after an unknown outcome is): the same cost, nothing moves.
          await credit.flushNow();
          const item: SettlementItem = { ...usage, guestWorkspaceId: guest, prices };
          const [written] = await dataSource.query(`SELECT (-amount)::text AS cost FROM billing_ledger WHERE kind = 'guest_debit' AND shared_request_id = $1`, [usage.sharedRequestId]);
          expect((await shared.settleMany([item])).costs).toEqual([canonicalMoney(written.cost)]);
          outcomes.resettled++;
        }
      }
    };
    const meteringLoop = async () => {
      while (Date.now() < deadline) {
        await metering.meterRunning();
        await new Promise((resolve) => setTimeout(resolve, 15));
      }
    };
    const topUps = async () => {
      let turnedPrepaid = false;
      while (Date.now() < deadline) {
        if (!turnedPrepaid && Date.now() > deadline - RUN_MS / 2) {
          await database.billing.addCredit(becomesPrepaid, '0.5');
          // What main.ts does on the key cache's `*` (a top-up's notification): the servers read its credit again.
          for (const credit of servers) credit.forgetAvailable();
          turnedPrepaid = true;
        }
        const cents = `0.${String(Math.floor(Math.random() * 1e10)).padStart(10, '0')}`;
        // Never the 0.0001 guest: it stays too poor for most requests, so refusals happen.
        await database.billing.addCredit(pick([guestOnly[0], guestOnly[1], ownerPrepaid, ownerEmpty]), cents === '0.0000000000' ? '0.01' : cents);
        await new Promise((resolve) => setTimeout(resolve, 30));
      }
    };
    const stopOne = async () => {
      await new Promise((resolve) => setTimeout(resolve, RUN_MS / 3));
      await metering.leaveRunning([stopping.replicaId], 'Terminated', 'scaled down');
    };
    await Promise.all([...Array.from({ length: 8 }, guestWorker), meteringLoop(), meteringLoop(), topUps(), stopOne()]);
    // A graceful stop writes what is pending and gives every lease back.
    for (const credit of servers) await credit.stop();
    await metering.meterRunning();

    expect(outcomes.settled).toBeGreaterThan(20);
    expect(outcomes.resettled).toBeGreaterThan(0);
    expect(outcomes.released).toBeGreaterThan(0);
    expect(outcomes.refused).toBeGreaterThan(0); // the 0.0001 guest cannot cover most holds

    // 1. Every prepaid balance equals the sum of its rows, compared as numeric (every digit).
    const books = await database.reconcile();
    const prepaid = books.filter((row) => row.balance !== null);
    expect(prepaid.map((row) => row.id).sort()).toEqual([...guestOnly, ownerPrepaid, ownerEmpty, becomesPrepaid].sort());
    expect(prepaid.filter((row) => !row.equal)).toEqual([]);
    expect(books.find((row) => row.id === ownerPostpaid)?.balance).toBeNull();

    // 2. Guests that only pay guest debits never dipped below zero: the running sum of their
    //    rows (in id order, which is their order under the workspace lock) stays at or above 0.
    const [{ lowest }] = await dataSource.query(`
      SELECT min(running)::text AS lowest FROM (
        SELECT sum(amount) OVER (PARTITION BY workspace_id ORDER BY id) AS running FROM billing_ledger WHERE workspace_id = ANY($1)) t`, [guestOnly]);
    expect(Number(lowest)).toBeGreaterThanOrEqual(0);

    // 3. Every request has one debit and one credit of opposite amounts; the totals mirror.
    const [pairs] = await dataSource.query(`
      SELECT count(*) FILTER (WHERE kind = 'guest_debit') AS debits, count(*) FILTER (WHERE kind = 'owner_credit') AS credits,
        (sum(amount) FILTER (WHERE kind = 'guest_debit') = -sum(amount) FILTER (WHERE kind = 'owner_credit')) AS mirrored,
        count(DISTINCT shared_request_id) AS requests
      FROM billing_ledger WHERE kind IN ('guest_debit', 'owner_credit')`);
    expect(pairs).toEqual({ debits: String(outcomes.settled), credits: String(outcomes.settled), mirrored: true, requests: String(outcomes.settled) });
    const unpaired = await dataSource.query(`
      SELECT d.shared_request_id FROM billing_ledger d LEFT JOIN billing_ledger c ON c.kind = 'owner_credit' AND c.shared_request_id = d.shared_request_id
      WHERE d.kind = 'guest_debit' AND (c.id IS NULL OR c.amount <> -d.amount OR c.prompt_tokens <> d.prompt_tokens OR c.completion_tokens <> d.completion_tokens)`);
    expect(unpaired).toEqual([]);

    // 4. Each cost is exactly tokens × prices (no rounding needed at these prices).
    const prices = Object.entries(MODELS).map(([id, price]) => `('${id}', ${price.inputPerMillion}::numeric, ${price.outputPerMillion}::numeric)`).join(', ');
    const mispriced = await dataSource.query(`
      SELECT l.shared_request_id, l.amount FROM billing_ledger l JOIN (VALUES ${prices}) p(model_id, input, output) ON p.model_id = l.model_id
      WHERE l.kind = 'guest_debit' AND -l.amount <> (l.prompt_tokens * p.input + l.completion_tokens * p.output) / 1000000`);
    expect(mispriced).toEqual([]);

    // 5. Nothing is held any more (every lease given back); the stopped replica's periods add up to its running time × price.
    expect(await dataSource.query('SELECT id FROM credit_reservations')).toEqual([]);
    const [stopped] = await dataSource.query(`
      SELECT -sum(l.amount) AS billed, extract(epoch FROM r.terminated_at - r.started_at) / 3600 * r.price_per_hour AS lifetime, count(*)::int AS periods
      FROM replicas r JOIN billing_ledger l ON l.replica_id = r.id WHERE r.id = $1 GROUP BY r.id`, [stopping.replicaId]);
    // Several metering periods (how many depends on the machine's speed), summing to its lifetime.
    expect(stopped.periods).toBeGreaterThan(1);
    expect(Number(stopped.billed)).toBeCloseTo(Number(stopped.lifetime), 7);
  });
  // The first top-up of a postpaid workspace writes an opening row of minus its rows so far; a
  // metering statement racing it must be counted on exactly one side of that line.
  it('a metering pass that started before a first top-up committed debits the new balance', async () => {
    const metering = new Metering(database.dataSource, { intervalMs: 3_600_000 }, pino({ level: 'silent' }));
    const workspace = await database.workspace();
    const { deploymentId } = await database.runningReplica(workspace, '36', 10);
    const runner = database.dataSource.createQueryRunner();
    await runner.connect();
    await runner.startTransaction();
    try {
      await topUp(runner.manager, workspace, '1');
      const pass = metering.meterRunning(); // its snapshot still sees a postpaid workspace; it waits for the lock
      await new Promise((resolve) => setTimeout(resolve, 200));
      await runner.commitTransaction();
      expect((await pass).map((charge) => charge.deploymentId)).toContain(deploymentId);
    } finally {
      await runner.release();
    }
    const [books] = (await database.reconcile()).filter((row) => row.id === workspace);
    expect(books.equal).toBe(true);
    expect(Number(books.balance)).toBeLessThan(1);
  });

  // A statement that locks a row after another pass (with a later clock) committed reads the
  // row's newer version: its billed end is then past this statement's clock. Set here directly:
  // the end 2 s ahead, as such a pass would leave it.
  it('a pass or a stop that reads a row billed past its own clock neither moves its end back nor ends the replica before it', async () => {
    const metering = new Metering(database.dataSource, { intervalMs: 3_600_000 }, pino({ level: 'silent' }));
    const workspace = await database.workspace();
    const { replicaId } = await database.runningReplica(workspace, '3.6', 10);
    await metering.meterRunning();
    // What the other pass wrote: the next 2 s billed, the end moved past them.
    await database.dataSource.query(`
      INSERT INTO billing_ledger (workspace_id, kind, deployment_id, replica_id, period_start, period_end, price_per_hour, amount)
      SELECT d.workspace_id, 'gpu_time', r.deployment_id, r.id, r.metered_until, r.metered_until + interval '2 seconds', r.price_per_hour, -(r.price_per_hour * 2 / 3600)
      FROM replicas r JOIN deployments d ON d.id = r.deployment_id WHERE r.id = $1`, [replicaId]);
    await database.dataSource.query(`UPDATE replicas SET metered_until = metered_until + interval '2 seconds' WHERE id = $1`, [replicaId]);
    const [ahead] = await database.dataSource.query('SELECT metered_until FROM replicas WHERE id = $1', [replicaId]);
    await metering.meterRunning();
    const [after] = await database.dataSource.query('SELECT metered_until FROM replicas WHERE id = $1', [replicaId]);
    expect(after.metered_until.getTime()).toBeGreaterThanOrEqual(ahead.metered_until.getTime());
    await metering.leaveRunning([replicaId], 'Terminated', 'scaled down');
    const [stopped] = await database.dataSource.query(`
      SELECT r.terminated_at, extract(epoch FROM r.terminated_at - r.started_at)::float8 AS lifetime_seconds,
        (SELECT sum(extract(epoch FROM l.period_end - l.period_start))::float8 FROM billing_ledger l WHERE l.replica_id = r.id) AS billed_seconds
      FROM replicas r WHERE r.id = $1`, [replicaId]);
    expect(stopped.terminated_at.getTime()).toBeGreaterThanOrEqual(ahead.metered_until.getTime());
    // The billed periods tile the lifetime: the 2 s stretch is billed once, and the replica ends after it.
    expect(stopped.billed_seconds).toBeCloseTo(stopped.lifetime_seconds, 5);
  });

  it('a first top-up waits for a meter that has written but not committed, and counts its rows', async () => {
    const metering = new Metering(database.dataSource, { intervalMs: 3_600_000 }, pino({ level: 'silent' }));
    const workspace = await database.workspace();
    const { replicaId } = await database.runningReplica(workspace, '36', 10);
    let credited: Promise<string> | undefined;
    await database.dataSource.transaction(async (manager) => {
      await metering.leaveRunning([replicaId], 'Terminated', 'deleted', manager);
      credited = database.billing.addCredit(workspace, '1');
      await new Promise((resolve) => setTimeout(resolve, 200));
    });
    expect(await credited).toBe('1'); // the opening row offset the (postpaid) GPU time, committed first
    const [books] = (await database.reconcile()).filter((row) => row.id === workspace);
    expect(books).toMatchObject({ balance: '1.0000000000', equal: true });
  });
});
