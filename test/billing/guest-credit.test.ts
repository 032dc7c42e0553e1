import pino from 'pino';
import { GuestCredit, type GuestCreditOptions } from '../../control-plane/billing/guest-credit';
import { SharedBilling, type Reservation, type TokenPrices } from '../../control-plane/billing/shared-billing';
import { ClusterNotifier } from '../../control-plane/events/cluster-notifier';
import { openBillingDatabase, type BillingDatabase } from './support/billing-database';

const PRICES: TokenPrices = { inputPerMillion: '10', outputPerMillion: '30' };
const silent = pino({ level: 'silent' });
let sequence = 0;
const usage = (owner: string, promptTokens: number, completionTokens: number) => ({
  sharedRequestId: `shr_gc_${++sequence}`, ownerWorkspaceId: owner, deploymentId: 'dep_owner', modelId: 'org/shared-model', promptTokens, completionTokens,
});

/** SharedBilling that counts its database calls (every one of them is a transaction). */
class CountingBilling extends SharedBilling {
  leases = 0;
  batches = 0;
  /** Makes the next batch commit, then throw as if the connection broke during COMMIT. */
  failAfterCommit = false;

  override async leaseCredit(...args: Parameters<SharedBilling['leaseCredit']>) {
    this.leases++;
    return await super.leaseCredit(...args);
  }

  override async settleMany<T>(...args: Parameters<SharedBilling['settleMany']>) {
    this.batches++;
    const result = await super.settleMany(...(args as [never, never])) as { costs: string[]; result: T | undefined };
    if (this.failAfterCommit) {
      this.failAfterCommit = false;
      throw new Error('connection terminated during COMMIT');
    }
    return result;
  }
}

/**
 * Guest credit in memory (billing/guest-credit.ts) against real PostgreSQL: requests are held
 * against a per-server lease without a database round trip, refused at 402 in memory once the
 * credit is known, settled in batches, and the books stay exact with several servers at once.
 */
describe('guest credit in memory', () => {
  let database: BillingDatabase;
  const credits: GuestCredit[] = [];

  const server = (billing: SharedBilling, id: string, options: Partial<GuestCreditOptions> = {}, notifier: ClusterNotifier | null = null) => {
    const credit = new GuestCredit(billing, id, notifier, silent, {
      settleIntervalMs: 3_600_000, leaseTtlMs: 60_000, leaseIdleMs: 0, leaseRequests: 4, ...options,
    });
    credits.push(credit);
    return credit;
  };
  const balance = async (id: string) => (await database.dataSource.query('SELECT credit_balance::text AS balance FROM workspaces WHERE id = $1', [id]))[0].balance;
  const holds = async (id: string) => (await database.dataSource.query('SELECT id, amount::text FROM credit_reservations WHERE workspace_id = $1 ORDER BY id', [id]));
  const reserve = async (credit: GuestCredit, guest: string, prompt: number, completion: number) => await credit.reserve(guest, prompt, completion, PRICES, 60_000);

  beforeAll(async () => {
    database = await openBillingDatabase();
  });

  afterEach(async () => {
    for (const credit of credits.splice(0)) await credit.stop();
    // Whatever a test did, every prepaid balance still equals the sum of its ledger rows.
    for (const row of await database.reconcile()) expect({ ...row, equal: row.equal ?? true }).toEqual({ ...row, equal: true });
  });

  afterAll(async () => {
    await database?.close();
  });

  it('holds requests in memory against one lease: one transaction for many admissions, none per request', async () => {
    const guest = await database.workspace('1');
    const billing = new CountingBilling(database.dataSource);
    const credit = server(billing, 'srv_a');
    const first = credit.reserve(guest, 1_000, 0, PRICES, 60_000); // 0.01: the lease must be taken
    expect(first).toBeInstanceOf(Promise);
    expect(await first).toMatchObject({ workspaceId: guest, amount: '0.01', prepaid: true });
    expect(billing.leases).toBe(1);
    // Room for 4 more such requests was leased with it (leaseRequests): they are answered synchronously.
    const more = Array.from({ length: 4 }, () => credit.reserve(guest, 1_000, 0, PRICES, 60_000));
    expect(more.every((hold) => hold !== null && !(hold instanceof Promise))).toBe(true);
    expect(billing.leases).toBe(1);
    expect(await holds(guest)).toEqual([{ id: 'lease_srv_a_' + guest, amount: '0.0500000000' }]);
    expect(credit.describe(guest)).toMatchObject({ lease: '0.05', held: '0.05', pending: '0' });
    // Holds are not charges: the balance did not move.
    expect(await balance(guest)).toBe('1.0000000000');
  });

  it('refuses at 402 in memory, without a database round trip, once the credit is known', async () => {
    const guest = await database.workspace('0.0001');
    const billing = new CountingBilling(database.dataSource);
    const credit = server(billing, 'srv_a');
    expect(credit.screen(guest, 1, 0, PRICES)).toBe(true); // unknown yet: admission asks the database
    expect(await reserve(credit, guest, 100_000, 0, PRICES as never)).toBeNull(); // 1: far above 0.0001
    expect(billing.leases).toBe(1);
    for (let index = 0; index < 100; index++) {
      expect(credit.screen(guest, 100_000, 0, PRICES)).toBe(false);
      expect(credit.reserve(guest, 100_000, 0, PRICES, 60_000)).toBeNull(); // synchronously
    }
    expect(billing.leases).toBe(1);
    // What the credit can hold is still admitted (the whole 0.0001: 10 prompt tokens at 10 per 1M).
    expect(credit.screen(guest, 10, 0, PRICES)).toBe(true);
    expect(await reserve(credit, guest, 10, 0)).toMatchObject({ amount: '0.0001' });
    expect(credit.reserve(guest, 0, 0, PRICES, 60_000)).toBeNull(); // nothing left, not even for a free request
  });

  it('a prepaid workspace at zero is refused even for a request that costs nothing; a postpaid one never, holding nothing', async () => {
    const empty = await database.workspace('0');
    const postpaid = await database.workspace();
    const owner = await database.workspace();
    const credit = server(new SharedBilling(database.dataSource), 'srv_a');
    expect(await reserve(credit, empty, 0, 0)).toBeNull();
    const open = (await reserve(credit, postpaid, 1_000_000_000, 1_000_000_000))!;
    expect(open).toMatchObject({ prepaid: false, amount: '40000' });
    expect(credit.reserve(postpaid, 5, 5, PRICES, 60_000)).toMatchObject({ prepaid: false }); // known now: synchronous
    credit.settle(open, usage(owner, 1_000, 2_000), PRICES);
    await credit.flushNow();
    expect(await balance(postpaid)).toBeNull();
    expect(await holds(postpaid)).toEqual([]);
    expect((await database.dataSource.query(`SELECT amount::text FROM billing_ledger WHERE workspace_id = $1`, [postpaid]))).toEqual([{ amount: '-0.0700000000' }]);
  });

  it('settles in batches: one transaction writes every pending request, the lease shrinks by exactly what was charged, and idle leases are given back', async () => {
    const guest = await database.workspace('5');
    const owner = await database.workspace('1');
    const billing = new CountingBilling(database.dataSource);
    const credit = server(billing, 'srv_a', { leaseIdleMs: 60_000 });
    const reservations = [] as Reservation[];
    for (let index = 0; index < 10; index++) reservations.push((await reserve(credit, guest, 1_000, 1_000))!); // 0.04 each
    for (const [index, reservation] of reservations.entries()) {
      if (index % 2 === 0) credit.settle(reservation, usage(owner, 700, 300), PRICES); // 0.016
      else credit.release(reservation);
    }
    expect(billing.batches).toBe(0);
    expect(credit.describe(guest)).toMatchObject({ held: '0', pending: '0.08' });
    const leaseBefore = (await holds(guest))[0].amount;
    await credit.flushNow();
    expect(billing.batches).toBe(1);
    expect(await balance(guest)).toBe('4.9200000000');
    expect(await balance(owner)).toBe('1.0800000000');
    const [{ debits, credits: credited }] = await database.dataSource.query(`
      SELECT count(*) FILTER (WHERE kind = 'guest_debit' AND workspace_id = $1)::int AS debits, count(*) FILTER (WHERE kind = 'owner_credit' AND workspace_id = $2)::int AS credits
      FROM billing_ledger`, [guest, owner]);
    expect([debits, credited]).toEqual([5, 5]);
    const leaseAfter = (await holds(guest))[0].amount;
    expect(Number(leaseBefore) - Number(leaseAfter)).toBeCloseTo(0.08, 10);
    expect(credit.describe(guest)).toMatchObject({ pending: '0', held: '0', lease: String(Number(leaseAfter)) });
    // Settling or releasing again changes nothing.
    credit.settle(reservations[0], usage(owner, 700, 300), PRICES);
    credit.release(reservations[1]);
    expect(credit.pendingSettlements).toBe(0);
    // Given back once idle: the lease goes, the balance stays.
    const idle = server(billing, 'srv_b', { leaseIdleMs: 0 });
    idle.settle((await reserve(idle, guest, 10, 0))!, usage(owner, 10, 0), PRICES);
    await idle.flushNow();
    expect((await holds(guest)).map((hold: { id: string }) => hold.id)).toEqual([`lease_srv_a_${guest}`]);
  });

  it('a batch whose COMMIT outcome was unknown is written again without charging anything twice', async () => {
    const guest = await database.workspace('1');
    const owner = await database.workspace('0');
    const billing = new CountingBilling(database.dataSource);
    const credit = server(billing, 'srv_a');
    const reservation = (await reserve(credit, guest, 1_000, 1_000))!;
    credit.settle(reservation, usage(owner, 1_000, 1_000), PRICES); // 0.04
    billing.failAfterCommit = true;
    await credit.flushNow(); // committed, but the server thinks it failed: still pending
    expect(credit.pendingSettlements).toBe(1);
    await credit.flushNow();
    expect(credit.pendingSettlements).toBe(0);
    expect(await balance(guest)).toBe('0.9600000000');
    expect(await balance(owner)).toBe('0.0400000000');
    expect(credit.describe(guest)).toMatchObject({ pending: '0', held: '0' });
  });

  it('a settlement that keeps failing is written alone, then given up with its id logged; the others are written', async () => {
    const guest = await database.workspace('1');
    const owner = await database.workspace('0');
    const poison = usage(owner, 10, 10);
    class Poisoned extends CountingBilling {
      override async settleMany<T>(...args: Parameters<SharedBilling['settleMany']>) {
        if (args[0].some((item) => item.sharedRequestId === poison.sharedRequestId)) throw new Error('numeric field overflow');
        return await super.settleMany<T>(...args);
      }
    }
    const lines: string[] = [];
    const logger = pino({ level: 'error' }, { write: (line: string) => void lines.push(line) });
    const credit = new GuestCredit(new Poisoned(database.dataSource), 'srv_p', null, logger, { settleIntervalMs: 3_600_000, leaseTtlMs: 60_000, leaseIdleMs: 60_000, leaseRequests: 4 });
    credits.push(credit);
    const holds = [] as Reservation[];
    for (let index = 0; index < 3; index++) holds.push((await reserve(credit, guest, 100, 100))!);
    const others = [usage(owner, 1, 1), usage(owner, 2, 2)];
    credit.settle(holds[0], poison, PRICES);
    credit.settle(holds[1], others[0], PRICES);
    credit.settle(holds[2], others[1], PRICES);
    for (let round = 0; round < 8; round++) await credit.flushNow();
    const written = await database.dataSource.query(`SELECT shared_request_id FROM billing_ledger WHERE kind = 'guest_debit' AND workspace_id = $1 ORDER BY id`, [guest]);
    expect(written.map((row: { shared_request_id: string }) => row.shared_request_id)).toEqual(others.map((item) => item.sharedRequestId));
    expect(credit.pendingSettlements).toBe(0);
    expect(credit.describe(guest)).toMatchObject({ pending: '0', held: '0' });
    expect(lines.some((line) => line.includes(poison.sharedRequestId) && line.includes('could not settle a guest request'))).toBe(true);
  });

  it('two servers on one guest never lease more than its balance; under parallel admitted and aborted requests the ledger is exact', async () => {
    const guest = await database.workspace('0.5');
    const owner = await database.workspace('0');
    const billings = [new SharedBilling(database.dataSource), new SharedBilling(database.dataSource)];
    const servers = [server(billings[0], 'srv_a', { leaseIdleMs: 50 }), server(billings[1], 'srv_b', { leaseIdleMs: 50 })];
    const deadline = Date.now() + 2_000;
    const outcome = { settled: 0, aborted: 0, refused: 0, charged: 0n };
    const flushing = servers.map(async (credit) => {
      while (Date.now() < deadline) {
        await credit.flushNow();
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    });
    const worker = async (credit: GuestCredit) => {
      while (Date.now() < deadline) {
        const prompt = 1 + Math.floor(Math.random() * 2_000);
        const completion = Math.floor(Math.random() * 500);
        const reservation = await credit.reserve(guest, prompt, completion, PRICES, 60_000);
        if (!reservation) {
          outcome.refused++;
          await new Promise((resolve) => setTimeout(resolve, 5));
          continue;
        }
        // At every moment, the leases of both servers fit in the balance.
        const [{ leased, balance: now }] = await database.dataSource.query(
          `SELECT coalesce(sum(amount), 0)::text AS leased, (SELECT credit_balance FROM workspaces WHERE id = $1)::text AS balance FROM credit_reservations WHERE workspace_id = $1`, [guest]);
        expect(Number(leased)).toBeLessThanOrEqual(Number(now) + 1e-10);
        await new Promise((resolve) => setTimeout(resolve, Math.random() * 5));
        if (Math.random() < 0.3) {
          credit.release(reservation); // the client went away before a token: free
          outcome.aborted++;
          continue;
        }
        const used = { prompt: Math.floor(Math.random() * (prompt + 1)), completion: Math.floor(Math.random() * (completion + 1)) };
        credit.settle(reservation, usage(owner, used.prompt, used.completion), PRICES);
        outcome.settled++;
        outcome.charged += BigInt(used.prompt * 10 + used.completion * 30);
      }
    };
    await Promise.all([...servers.flatMap((credit) => [worker(credit), worker(credit), worker(credit)]), ...flushing]);
    for (const credit of servers) await credit.stop();
    expect(outcome.settled).toBeGreaterThan(20);
    expect(outcome.aborted).toBeGreaterThan(0);
    expect(outcome.refused).toBeGreaterThan(0); // 0.5 runs out
    const [books] = await database.dataSource.query(`
      SELECT (SELECT credit_balance FROM workspaces WHERE id = $1)::text AS balance,
        count(*) FILTER (WHERE kind = 'guest_debit')::int AS debits, count(*) FILTER (WHERE kind = 'owner_credit')::int AS credits,
        (sum(amount) FILTER (WHERE kind = 'guest_debit'))::text AS debited, (sum(amount) FILTER (WHERE kind = 'owner_credit'))::text AS credited
      FROM billing_ledger WHERE shared_request_id IS NOT NULL AND (workspace_id = $1 OR workspace_id = $2)`, [guest, owner]);
    expect(books.debits).toBe(outcome.settled);
    expect(books.credits).toBe(outcome.settled);
    // Exactly what was used, to the unit: Σ (prompt × 10 + completion × 30) / 1e6.
    expect(books.debited).toBe(`-${(Number(outcome.charged) / 1e6).toFixed(10)}`);
    expect(books.credited).toBe((Number(outcome.charged) / 1e6).toFixed(10));
    expect(Number(books.balance)).toBeGreaterThanOrEqual(0);
    expect(await holds(guest)).toEqual([]); // both servers gave their leases back on stop
  });

  it('a crashed server\'s lease stops counting after its TTL; nothing was charged for it', async () => {
    const guest = await database.workspace('1');
    const crashed = new GuestCredit(new SharedBilling(database.dataSource), 'srv_crashed', null, silent, { settleIntervalMs: 3_600_000, leaseTtlMs: 200, leaseIdleMs: 60_000, leaseRequests: 100 });
    expect(await reserve(crashed, guest, 10_000, 0)).not.toBeNull(); // 0.1, leasing 10.1 capped at the whole 1
    const survivor = server(new SharedBilling(database.dataSource), 'srv_b');
    expect(await reserve(survivor, guest, 10_000, 0)).toBeNull(); // all of it is leased by the other server
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(await reserve(survivor, guest, 10_000, 0)).not.toBeNull();
    expect(await balance(guest)).toBe('1.0000000000');
  });

  it('every server hears of another server\'s credit change; a top-up makes what it knew unknown', async () => {
    const guest = await database.workspace('0.0001');
    const url = (database.dataSource.options as { url: string }).url;
    const notifiers = await Promise.all([ClusterNotifier.start(url, database.dataSource, silent), ClusterNotifier.start(url, database.dataSource, silent)]);
    try {
      const a = server(new CountingBilling(database.dataSource), notifiers[0].instanceId, {}, notifiers[0]);
      const billingB = new CountingBilling(database.dataSource);
      const b = server(billingB, notifiers[1].instanceId, {}, notifiers[1]);
      expect(await reserve(b, guest, 1_000, 0)).toBeNull(); // B learns 0.0001 available
      expect(b.describe(guest)?.available).toBe('0.0001');
      expect(await reserve(a, guest, 5, 0)).not.toBeNull(); // A leases all of it (5 × 10 / 1M, room for 4 more)
      await waitUntil(() => b.describe(guest)?.available === '0', 'B hears A\'s lease');
      expect(b.screen(guest, 1, 0, PRICES)).toBe(false); // in memory
      expect(billingB.leases).toBe(1);
      await database.billing.addCredit(guest, '1');
      b.forgetAvailable(); // what main.ts does on the key cache's `*` (the top-up's notification)
      expect(b.screen(guest, 1_000, 0, PRICES)).toBe(true);
      expect(await reserve(b, guest, 1_000, 0)).not.toBeNull();
      expect(billingB.leases).toBe(2);
    } finally {
      for (const credit of credits.splice(0)) await credit.stop();
      await Promise.all(notifiers.map((notifier) => notifier.stop()));
    }
  });
});

async function waitUntil(condition: () => boolean, what: string): Promise<void> {
  const deadline = Date.now() + 5_000;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}
