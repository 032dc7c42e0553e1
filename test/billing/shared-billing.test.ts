import { SharedBilling, type SettlementItem, type TokenPrices } from '../../control-plane/billing/shared-billing';
import { AppError } from '../../control-plane/errors/app-error';
import { openBillingDatabase, type BillingDatabase } from './support/billing-database';

const PRICES: TokenPrices = { inputPerMillion: '10', outputPerMillion: '30' };
let requestSequence = 0;
const usage = (guest: string, owner: string, promptTokens: number, completionTokens: number, prices: TokenPrices = PRICES): SettlementItem => ({
  sharedRequestId: `shr_${++requestSequence}`, guestWorkspaceId: guest, ownerWorkspaceId: owner, deploymentId: 'dep_owner', modelId: 'org/shared-model',
  promptTokens, completionTokens, prices,
});

/**
 * The ledger side of per-token billing of guest requests against real PostgreSQL: settlement
 * (guest debited, owner credited, once per shared request). Holds are leases, taken and tested
 * with guest credit in memory (guest-credit.test.ts).
 */
describe('shared billing', () => {
  let database: BillingDatabase;
  let billing: SharedBilling;
  let creditChanges = 0;
  const balance = async (id: string) => (await database.dataSource.query('SELECT credit_balance::text AS balance FROM workspaces WHERE id = $1', [id]))[0].balance;
  const rows = async (id: string) => await database.dataSource.query(
    'SELECT kind, amount::text, model_id, deployment_id, prompt_tokens, completion_tokens, shared_request_id FROM billing_ledger WHERE workspace_id = $1 ORDER BY id', [id]);
  const settle = async (item: SettlementItem) => (await billing.settleMany([item])).costs[0];

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
    expect(await settle(usage(guest, owner, 1, 0, prices))).toBe('0.00000018');
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

  it('settles once per shared request: concurrent and later repeats return the same cost and change nothing', async () => {
    const guest = await database.workspace('5');
    const owner = await database.workspace('1');
    const request = usage(guest, owner, 700, 300); // 0.007 + 0.009
    const [first, second, third] = await Promise.all([settle(request), settle(request), settle(request)]);
    expect([first, second, third]).toEqual(['0.016', '0.016', '0.016']);
    // Listed twice in one batch, it still counts once.
    expect((await billing.settleMany([request, request])).costs).toEqual(['0.016', '0.016']);
    expect(await balance(guest)).toBe('4.9840000000');
    expect(await balance(owner)).toBe('1.0160000000');
    expect((await rows(guest)).filter((row: any) => row.kind === 'guest_debit')).toHaveLength(1);
    expect((await rows(owner)).filter((row: any) => row.kind === 'owner_credit')).toHaveLength(1);
  });

  it('a postpaid guest is billed per token in the ledger; a postpaid owner is credited in the ledger only', async () => {
    const guest = await database.workspace();
    const owner = await database.workspace();
    expect(await settle(usage(guest, owner, 1_000, 2_000))).toBe('0.07');
    expect([await balance(guest), await balance(owner)]).toEqual([null, null]);
    expect((await rows(guest)).map((row: any) => [row.kind, row.amount])).toEqual([['guest_debit', '-0.0700000000']]);
    expect((await rows(owner)).map((row: any) => [row.kind, row.amount])).toEqual([['owner_credit', '0.0700000000']]);
    // Its first top-up makes it prepaid: an opening row closes out the postpaid history, so the balance is the top-up alone.
    expect(await database.billing.addCredit(guest, '2')).toBe('2');
    expect((await rows(guest)).map((row: any) => [row.kind, row.amount])).toEqual([
      ['guest_debit', '-0.0700000000'], ['opening_balance', '0.0700000000'], ['top_up', '2.0000000000']]);
  });

  it('a workspace using its own shared deployment nets zero', async () => {
    const guest = await database.workspace('1');
    expect(await settle(usage(guest, guest, 10, 0))).toBe('0.0001');
    expect(await balance(guest)).toBe('1.0000000000');
    expect((await rows(guest)).map((row: any) => row.kind)).toEqual(['top_up', 'guest_debit', 'owner_credit']);
  });

  it('tells the key cache when a settlement moves a prepaid balance across zero', async () => {
    const guest = await database.workspace('0.01');
    const owner = await database.workspace('0');
    const before = creditChanges;
    await settle(usage(guest, owner, 1_000, 0)); // 0.01: all of it
    expect(await balance(guest)).toBe('0.0000000000');
    expect(creditChanges).toBe(before + 1);
    const again = await database.workspace('1');
    await settle(usage(again, owner, 1, 0));
    expect(creditChanges).toBe(before + 1); // nobody crossed zero
  });

  it('refuses bad arguments naming them', async () => {
    const guest = await database.workspace('1');
    const owner = await database.workspace('1');
    const cases: Array<[string, () => Promise<unknown>]> = [
      ['promptTokens', () => settle({ ...usage(guest, owner, 1, 1), promptTokens: Number.NaN })],
      ['completionTokens', () => settle({ ...usage(guest, owner, 1, 1), completionTokens: 1_000_000_001 })],
      ['inputPerMillion', () => settle(usage(guest, owner, 1, 1, { inputPerMillion: '-1', outputPerMillion: '1' }))],
      ['outputPerMillion', () => settle(usage(guest, owner, 1, 1, { inputPerMillion: '1', outputPerMillion: 'abc' }))],
      ['sharedRequestId', () => settle({ ...usage(guest, owner, 1, 1), sharedRequestId: '' })],
      ['workspaceId', () => settle(usage(guest, 'ws_missing', 1, 1))],
      ['ttlMs', () => billing.leaseCredit(guest, 'lease_x', 0, () => null)],
      ['guestWorkspaceId', () => billing.leaseCredit('ws_missing', 'lease_x', 1_000, () => null)],
    ];
    const outcomes = [];
    for (const [param, call] of cases) {
      const error = await call().then(() => null, (caught: unknown) => caught);
      outcomes.push({ param, error: error instanceof AppError ? { code: error.code, param: error.param } : String(error) });
    }
    expect(outcomes).toEqual(cases.map(([param]) => ({ param, error: { code: param.endsWith('WorkspaceId') || param === 'workspaceId' ? 'not_found' : 'invalid_request', param } })));
    expect(await rows(guest)).toHaveLength(1); // the top-up alone
  });
});
