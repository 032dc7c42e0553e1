import { moneyOf, tokenCost, unitPrices, unitsOf } from '../../control-plane/billing/credit-units';
import { openBillingDatabase } from './support/billing-database';
import { openForSuite } from '../support/suite';

/**
 * Money in memory (ledger units of 1e-10 as bigint) agrees with PostgreSQL's `numeric` to the
 * unit: guest credit is decided in memory and written by SQL, so the two must never differ.
 */
describe('credit units', () => {
  const database = openForSuite(() => openBillingDatabase(), (opened) => opened.close());

  test('decimal text round-trips through units', () => {
    for (const [text, canonical] of [['0', '0'], ['12.5', '12.5'], ['-0.0000001800', '-0.00000018'], ['9999999999.9999999999', '9999999999.9999999999'], ['1.0000000000', '1']]) {
      expect(moneyOf(unitsOf(text))).toBe(canonical);
    }
    expect(unitsOf('0.0000000001')).toBe(1n);
    expect(() => unitsOf('0.00000000001')).toThrow();
    expect(() => unitsOf('1e3')).toThrow();
  });

  test('token costs equal PostgreSQL\'s round((p × in + c × out) × 0.000001, 10), rounding included', async () => {
    const prices = ['0', '0.18', '2.5', '10.0001', '0.0000000001', '0.1234567891', '999999.9999999999', '0.0000005', '0.00005'];
    const cases: Array<[number, number, string, string]> = [];
    let seed = 11;
    const random = () => ((seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31) / 2 ** 31);
    for (let index = 0; index < 400; index++) {
      const tokens = () => [0, 1, 2, 999_999, 1_000_000_000][Math.floor(random() * 5)] ?? 0;
      cases.push([random() < 0.5 ? tokens() : Math.floor(random() * 5_000_000), Math.floor(random() * 100_000), prices[Math.floor(random() * prices.length)], prices[Math.floor(random() * prices.length)]]);
    }
    const rows: Array<{ cost: string }> = await database.dataSource.query(`
      SELECT round((p::numeric * i::numeric + c::numeric * o::numeric) * 0.000001, 10)::text AS cost
      FROM unnest($1::int[], $2::int[], $3::text[], $4::text[]) WITH ORDINALITY AS t(p, c, i, o, n) ORDER BY n`,
    [cases.map((row) => row[0]), cases.map((row) => row[1]), cases.map((row) => row[2]), cases.map((row) => row[3])]);
    const memory = cases.map(([prompt, completion, input, output]) => moneyOf(tokenCost(prompt, completion, unitPrices({ inputPerMillion: input, outputPerMillion: output }))));
    expect(memory).toEqual(rows.map((row) => moneyOf(unitsOf(row.cost))));
    // Some of them did round (a half-unit case included): the rule is exercised, not just exact products.
    expect(moneyOf(tokenCost(1, 0, unitPrices({ inputPerMillion: '0.00005', outputPerMillion: '0' })))).toBe('0.0000000001'); // 0.5 unit: half up
    expect(moneyOf(tokenCost(1, 0, unitPrices({ inputPerMillion: '0.00004', outputPerMillion: '0' })))).toBe('0');
  });
});
