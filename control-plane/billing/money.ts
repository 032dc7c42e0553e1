import { AppError } from '../errors/app-error';
import { quoteValue } from '../errors/quote-value';

/**
 * An exact amount of money as a decimal string (`"12.5"`, `"-0.00000018"`). Money never
 * becomes a JS number: a double cannot hold 0.1, and a ledger that must equal a balance to
 * the last digit cannot round. Arithmetic happens in PostgreSQL `numeric`; TypeScript only
 * checks the syntax and bounds of what comes in and trims what goes out.
 */
export type Money = string;

/** Decimal places the ledger and balances keep (`numeric(20,10)`). */
export const MONEY_SCALE = 10;
/** The largest single top-up (or opening credit): keeps a typo from minting a fortune. */
export const MAX_TOP_UP: Money = '1000000';

/** sign, integer digits, fraction digits, exponent; anything else is not a decimal. */
const DECIMAL = /^([+-]?)(\d*)(?:\.(\d*))?(?:[eE]([+-]?\d{1,3}))?$/;

export interface DecimalBounds {
  /** `positive`: above 0; `non-negative`: 0 allowed. */
  min: 'positive' | 'non-negative';
  max: Money;
  /** Decimal places allowed. @default MONEY_SCALE */
  scale?: number;
}

/**
 * Reads a decimal from a string, or from a number a JSON client sent (read through its
 * shortest round-trip form, so `0.1` is `"0.1"`), and returns it in canonical form (no
 * exponent, no leading or trailing zeros). Refuses anything else, naming `param`.
 */
export function parseDecimal(value: unknown, param: string, bounds: DecimalBounds): Money {
  const scale = bounds.scale ?? MONEY_SCALE;
  const rule = `${param} must be a decimal ${bounds.min === 'positive' ? 'above 0' : 'from 0'} up to ${bounds.max} with at most ${scale} decimal places`;
  const refuse = (): never => {
    throw new AppError('invalid_request', `${rule}, got ${quoteValue(value)}`, { param });
  };
  let text: string;
  if (typeof value === 'string') text = value.trim();
  else if (typeof value === 'number' && Number.isFinite(value)) text = String(value);
  else return refuse();
  if (text.length > 64) return refuse();
  const match = DECIMAL.exec(text);
  if (!match || (match[2] === '' && (match[3] ?? '') === '')) return refuse();
  const [, sign, whole, fraction = '', exponent = '0'] = match;
  const canonical = shiftPoint(whole, fraction, Number(exponent));
  const negative = sign === '-' && canonical !== '0';
  const places = canonical.includes('.') ? canonical.length - canonical.indexOf('.') - 1 : 0;
  if (negative || places > scale) return refuse();
  if (bounds.min === 'positive' && canonical === '0') return refuse();
  if (compareNonNegative(canonical, canonicalMoney(bounds.max)) > 0) return refuse();
  return canonical;
}

/** A credit amount an operator adds: above 0, at most MAX_TOP_UP, at most 10 decimal places. */
export function parseTopUp(value: unknown, param: string): Money {
  return parseDecimal(value, param, { min: 'positive', max: MAX_TOP_UP });
}

/** `numeric` text from PostgreSQL in canonical form: `"100.0000000000"` → `"100"`, `"-0.0000001800"` → `"-0.00000018"`. */
export function canonicalMoney(text: string): Money {
  const negative = text.startsWith('-');
  const digits = negative || text.startsWith('+') ? text.slice(1) : text;
  const [whole, fraction = ''] = digits.split('.');
  const canonical = shiftPoint(whole, fraction, 0);
  return negative && canonical !== '0' ? `-${canonical}` : canonical;
}

/** Above zero (a string test on canonical or `numeric` text; no arithmetic). */
export function isPositive(amount: Money): boolean {
  return !amount.startsWith('-') && /[1-9]/.test(amount);
}

/** Moves the decimal point `exponent` places right and strips leading and trailing zeros. */
function shiftPoint(whole: string, fraction: string, exponent: number): string {
  let digits = whole + fraction;
  let point = whole.length + exponent;
  if (point < 0) {
    digits = '0'.repeat(-point) + digits;
    point = 0;
  }
  if (point > digits.length) digits += '0'.repeat(point - digits.length);
  const integer = digits.slice(0, point).replace(/^0+/, '') || '0';
  const decimals = digits.slice(point).replace(/0+$/, '');
  return decimals ? `${integer}.${decimals}` : integer;
}

/** Orders two canonical non-negative decimals. */
function compareNonNegative(left: string, right: string): number {
  const [leftWhole, leftFraction = ''] = left.split('.');
  const [rightWhole, rightFraction = ''] = right.split('.');
  if (leftWhole.length !== rightWhole.length) return leftWhole.length - rightWhole.length;
  if (leftWhole !== rightWhole) return leftWhole < rightWhole ? -1 : 1;
  const width = Math.max(leftFraction.length, rightFraction.length);
  const a = leftFraction.padEnd(width, '0');
  const b = rightFraction.padEnd(width, '0');
  return a === b ? 0 : a < b ? -1 : 1;
}
