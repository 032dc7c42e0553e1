import { SharedBilling, type Reservation, type TokenPrices } from '../../control-plane/billing/shared-billing';
import { AppError } from '../../control-plane/errors/app-error';
import { openBillingDatabase, type BillingDatabase } from './support/billing-database';

const PRICES: TokenPrices = { inputPerMillion: '10', outputPerMillion: '30' };
const TTL_MS = 60_000;
let requestSequence = 0;
const usage = (owner: string, promptTokens: number, completionTokens: number) => ({
  sharedRequestId: `shr_${++requestSequence}`, ownerWorkspaceId: owner, deploymentId: 'dep_owner', modelId: 'org/shared-model', promptTokens, completionTokens,
});

/** Per-token billing of guest requests: holds, settlement, release, against real PostgreSQL. */
describe('shared billing', () => {
  let database: BillingDatabase;
  let billing: SharedBilling;
  let creditChanges = 0;
  const balance = async (id: string) => (await database.dataSource.query('SELECT credit_balance::text AS balance FROM workspaces WHERE id = $1', [id]))[0].balance;
  const rows = async (id: string) => await database.dataSource.query(
    'SELECT kind, amount::text, model_id, deployment_id, prompt_tokens, completion_tokens, shared_request_id FROM billing_ledger WHERE workspace_id = $1 ORDER BY id', [id]);

  beforeAll(async () => {
    database = await openBillingDatabase();
    billing = new SharedBilling(database.dataSource, () => creditChanges++);
  });

  afterAll(async () => {
    await database?.close();
  });

  afterEach(async () => {
    // Whatever a test did, every prepaid balance still equals the sum of its ledger rows.
    for (const row of await database.reconcile()) expect({ ...row, equal: row.equal ?? true }).toEqual({ ...row, equal: true });
  });

  it('is exact: 1 token at 0.18 per 1M costs 0.00000018, and 0.1 + 0.2 of credit is 0.3', async () => {
    const guest = await database.workspace('0.1');
    expect(await database.billing.addCredit(guest, '0.2')).toBe('0.3');
    const owner = await database.workspace('0');
    const prices = { inputPerMillion: '0.18', outputPerMillion: '0.18' };
    const reservation = (await billing.reserve(guest, 1, 0, prices, TTL_MS))!;
    expect(reservation).toMatchObject({ workspaceId: guest, amount: '0.00000018', prepaid: true });
    expect(await billing.settle(reservation, usage(owner, 1, 0), prices)).toBe('0.00000018');
    expect(await balance(guest)).toBe('0.2999998200');
    expect(await balance(owner)).toBe('0.0000001800');
    const [debit] = (await rows(guest)).filter((row: any) => row.kind === 'guest_debit');
    const [credit] = await rows(owner);
    expect(debit).toMatchObject({ amount: '-0.0000001800', model_id: 'org/shared-model', deployment_id: null, prompt_tokens: 1, completion_tokens: 0 });
    expect(credit).toMatchObject({ kind: 'owner_credit', amount: '0.0000001800', deployment_id: 'dep_owner', shared_request_id: debit.shared_request_id });
    // Many small charges add up with no drift: 1,000,000 × 0.00000018 would be 0.18 exactly.
    const [{ sum }] = await database.dataSource.query(`SELECT sum(x)::text AS sum FROM (SELECT 0.00000018::numeric(20,10) AS x FROM generate_series(1, 1000000)) t`);
    expect(sum).toBe('0.1800000000');
  });

  it('holds the most a request can cost and refuses what available credit cannot cover; release gives it back', async () => {
    const guest = await database.workspace('1');
    // 50,000 × 10/1M + 10,000 × 30/1M = 0.5 + 0.3
    const first = (await billing.reserve(guest, 50_000, 10_000, PRICES, TTL_MS))!;
    expect(first).toMatchObject({ amount: '0.8', prepaid: true });
    expect(await billing.reserve(guest, 50_000, 10_000, PRICES, TTL_MS)).toBeNull();
    const exactRest = (await billing.reserve(guest, 20_000, 0, PRICES, TTL_MS))!; // 0.2: exactly what is left
    expect(exactRest.amount).toBe('0.2');
    expect(await billing.reserve(guest, 1, 0, PRICES, TTL_MS)).toBeNull();
    await billing.release(first);
    expect(await billing.reserve(guest, 50_000, 10_000, PRICES, TTL_MS)).not.toBeNull();
    // Holds are not charges: the balance and the ledger never moved.
    expect(await balance(guest)).toBe('1.0000000000');
    expect((await rows(guest)).map((row: any) => row.kind)).toEqual(['top_up']);
  });

  it('refuses a prepaid guest at or below zero even for a request that costs nothing', async () => {
    const empty = await database.workspace('0');
    expect(await billing.reserve(empty, 0, 0, PRICES, TTL_MS)).toBeNull();
    expect(await billing.reserve(empty, 1, 1, PRICES, TTL_MS)).toBeNull();
  });

  it('lets holds expire, so a crashed server\'s holds stop counting', async () => {
    const guest = await database.workspace('1');
    expect(await billing.reserve(guest, 100_000, 0, PRICES, 150)).not.toBeNull(); // holds all of it
    expect(await billing.reserve(guest, 1, 0, PRICES, TTL_MS)).toBeNull();
    await new Promise((resolve) => setTimeout(resolve, 250));
    expect(await billing.reserve(guest, 100_000, 0, PRICES, TTL_MS)).not.toBeNull();
    const [{ holds }] = await database.dataSource.query('SELECT count(*)::int AS holds FROM credit_reservations WHERE workspace_id = $1', [guest]);
    expect(holds).toBe(1); // the expired one was cleared on the way
  });

  it('never overdraws under concurrent reserves of one workspace', async () => {
    const guest = await database.workspace('1');
    const results = await Promise.all(Array.from({ length: 25 }, () => billing.reserve(guest, 10_000, 0, PRICES, TTL_MS))); // 0.1 each
    expect(results.filter(Boolean)).toHaveLength(10);
    const [{ held }] = await database.dataSource.query('SELECT sum(amount)::text AS held FROM credit_reservations WHERE workspace_id = $1', [guest]);
    expect(held).toBe('1.0000000000');
  });

  it('settles once per shared request: a second settle returns the same cost and changes nothing', async () => {
    const guest = await database.workspace('5');
    const owner = await database.workspace('1');
    const reservation = (await billing.reserve(guest, 1_000, 1_000, PRICES, TTL_MS))!;
    const request = usage(owner, 700, 300); // 0.007 + 0.009
    const [first, second, third] = await Promise.all([
      billing.settle(reservation, request, PRICES), billing.settle(reservation, request, PRICES), billing.settle(reservation, request, PRICES),
    ]);
    expect([first, second, third]).toEqual(['0.016', '0.016', '0.016']);
    expect(await billing.settle(reservation, request, PRICES)).toBe('0.016');
    expect(await balance(guest)).toBe('4.9840000000');
    expect(await balance(owner)).toBe('1.0160000000');
    expect((await rows(guest)).filter((row: any) => row.kind === 'guest_debit')).toHaveLength(1);
    expect((await rows(owner)).filter((row: any) => row.kind === 'owner_credit')).toHaveLength(1);
    const [{ holds }] = await database.dataSource.query('SELECT count(*)::int AS holds FROM credit_reservations WHERE workspace_id = $1', [guest]);
    expect(holds).toBe(0);
  });

  it('a postpaid guest is never refused and is billed per token in the ledger; a postpaid owner is credited in the ledger only', async () => {
    const guest = await database.workspace();
    const owner = await database.workspace();
    const reservation = (await billing.reserve(guest, 1_000_000_000, 1_000_000_000, PRICES, TTL_MS))!;
    expect(reservation).toMatchObject({ prepaid: false, amount: '40000' });
    expect(await billing.settle(reservation, usage(owner, 1_000, 2_000), PRICES)).toBe('0.07');
    expect([await balance(guest), await balance(owner)]).toEqual([null, null]);
    expect((await rows(guest)).map((row: any) => [row.kind, row.amount])).toEqual([['guest_debit', '-0.0700000000']]);
    expect((await rows(owner)).map((row: any) => [row.kind, row.amount])).toEqual([['owner_credit', '0.0700000000']]);
    await billing.release(reservation); // nothing held: nothing to drop
    // Its first top-up makes it prepaid: an opening row closes out the postpaid history, so the balance is the top-up alone.
    expect(await database.billing.addCredit(guest, '2')).toBe('2');
    expect((await rows(guest)).map((row: any) => [row.kind, row.amount])).toEqual([
      ['guest_debit', '-0.0700000000'], ['opening_balance', '0.0700000000'], ['top_up', '2.0000000000']]);
  });

  it('charges what the request did cost, refunding the rest of the hold, and a workspace using its own shared deployment nets zero', async () => {
    const guest = await database.workspace('1');
    const reservation = (await billing.reserve(guest, 10_000, 10_000, PRICES, TTL_MS))!; // 0.4 held
    expect(await billing.settle(reservation, usage(guest, 10, 0), PRICES)).toBe('0.0001');
    expect(await balance(guest)).toBe('1.0000000000');
    expect((await rows(guest)).map((row: any) => row.kind)).toEqual(['top_up', 'guest_debit', 'owner_credit']);
    expect(await billing.reserve(guest, 100_000, 0, PRICES, TTL_MS)).not.toBeNull(); // the whole 1 is available again
  });

  it('tells the key cache when a settlement moves a prepaid balance across zero', async () => {
    const guest = await database.workspace('0.01');
    const owner = await database.workspace('0');
    const before = creditChanges;
    const reservation = (await billing.reserve(guest, 1_000, 0, PRICES, TTL_MS))!; // 0.01: all of it
    await billing.settle(reservation, usage(owner, 1_000, 0), PRICES);
    expect(await balance(guest)).toBe('0.0000000000');
    expect(creditChanges).toBe(before + 1);
    const again = await database.workspace('1');
    await billing.settle((await billing.reserve(again, 1, 0, PRICES, TTL_MS))!, usage(owner, 1, 0), PRICES);
    expect(creditChanges).toBe(before + 1); // nobody crossed zero
  });

  it('refuses bad arguments naming them', async () => {
    const guest = await database.workspace('1');
    const owner = await database.workspace('1');
    const reservation: Reservation = { id: 'hold_x', workspaceId: guest, amount: '0', prepaid: true };
    const cases: Array<[string, () => Promise<unknown>]> = [
      ['maxPromptTokens', () => billing.reserve(guest, -1, 0, PRICES, TTL_MS)],
      ['maxCompletionTokens', () => billing.reserve(guest, 0, 1.5, PRICES, TTL_MS)],
      ['maxPromptTokens', () => billing.reserve(guest, 1_000_000_001, 0, PRICES, TTL_MS)],
      ['inputPerMillion', () => billing.reserve(guest, 1, 1, { inputPerMillion: '-1', outputPerMillion: '1' }, TTL_MS)],
      ['outputPerMillion', () => billing.reserve(guest, 1, 1, { inputPerMillion: '1', outputPerMillion: 'abc' }, TTL_MS)],
      ['ttlMs', () => billing.reserve(guest, 1, 1, PRICES, 0)],
      ['guestWorkspaceId', () => billing.reserve('ws_missing', 1, 1, PRICES, TTL_MS)],
      ['promptTokens', () => billing.settle(reservation, { ...usage(owner, 1, 1), promptTokens: Number.NaN }, PRICES)],
      ['sharedRequestId', () => billing.settle(reservation, { ...usage(owner, 1, 1), sharedRequestId: '' }, PRICES)],
      ['workspaceId', () => billing.settle(reservation, usage('ws_missing', 1, 1), PRICES)],
    ];
    const outcomes = [];
    for (const [param, call] of cases) {
      const error = await call().then(() => null, (caught: unknown) => caught);
      outcomes.push({ param, error: error instanceof AppError ? { code: error.code, param: error.param } : String(error) });
    }
    expect(outcomes).toEqual(cases.map(([param]) => ({ param, error: { code: param.endsWith('WorkspaceId') || param === 'workspaceId' ? 'not_found' : 'invalid_request', param } })));
  });
});
