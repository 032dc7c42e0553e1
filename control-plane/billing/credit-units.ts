import { MONEY_SCALE, type Money } from './money';

/**
 * Money in memory, exactly: an integer count of the ledger's smallest unit, 10⁻¹⁰ (the scale
 * of `numeric(20,10)`), as a bigint. Guest credit is decided in memory on the request path
 * (control-plane/billing/guest-credit.ts), so it cannot wait for PostgreSQL to do the sums;
 * these are the same sums, on integers, with the same rounding, so memory and the ledger
 * agree to the last unit (test/billing/credit-units.test.ts checks it against PostgreSQL).
 */
export type Units = bigint;

const SCALE = 10n ** BigInt(MONEY_SCALE);
const MILLION = 1_000_000n;
const DECIMAL = /^(-?)(\d+)(?:\.(\d+))?$/;

/** `"12.5"`, `"-0.0000001800"` (canonical or `numeric` text, at most 10 decimal places) → units. */
export function unitsOf(amount: Money): Units {
  const match = DECIMAL.exec(amount);
  if (!match || (match[3] ?? '').length > MONEY_SCALE) throw new Error(`not a ledger amount: '${amount}'`);
  const [, sign, whole, fraction = ''] = match;
  const units = BigInt(whole) * SCALE + BigInt(fraction.padEnd(MONEY_SCALE, '0'));
  return sign === '-' ? -units : units;
}

/** Units → canonical decimal text (`"0.00000018"`, `"-3"`, `"0"`). */
export function moneyOf(units: Units): Money {
  const negative = units < 0n;
  const magnitude = negative ? -units : units;
  const whole = magnitude / SCALE;
  const fraction = (magnitude % SCALE).toString().padStart(MONEY_SCALE, '0').replace(/0+$/, '');
  const text = fraction ? `${whole}.${fraction}` : `${whole}`;
  return negative ? `-${text}` : text;
}

/** Per-token prices per 1M tokens, as units (decimal text with at most 10 places in). */
export interface UnitPrices {
  readonly input: Units;
  readonly output: Units;
}

export function unitPrices(prices: { inputPerMillion: Money; outputPerMillion: Money }): UnitPrices {
  return { input: unitsOf(prices.inputPerMillion), output: unitsOf(prices.outputPerMillion) };
}

/**
 * `round((prompt × input + completion × output) × 0.000001, 10)`, PostgreSQL's rounding of
 * `numeric` (half away from zero; every term here is non-negative, so half up): the cost the
 * ledger writes for these tokens at these prices, to the unit.
 */
export function tokenCost(promptTokens: number, completionTokens: number, prices: UnitPrices): Units {
  const scaled = BigInt(promptTokens) * prices.input + BigInt(completionTokens) * prices.output;
  return (scaled + MILLION / 2n) / MILLION;
}
