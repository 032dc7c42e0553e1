/** How the console writes money and times. */

/**
 * A USD amount to the cent, from its exact decimal string (or a number, read through its
 * shortest form): rounded half away from zero without a float, a minus sign as "−", and an
 * amount that is not zero but rounds to it as "<$0.01" (or "−<$0.01") rather than "$0.00". The
 * exact amount goes in a title (components/Money.tsx).
 */
export function formatUsd(amount: string | number): string {
  const exact = typeof amount === 'number' ? numberText(amount) : amount.trim();
  const negative = exact.startsWith('-');
  const [whole = '0', fraction = ''] = exact.replace(/^[-+]/, '').split('.');
  let cents = BigInt(`${whole || '0'}${fraction.padEnd(2, '0').slice(0, 2)}`);
  if (Number(fraction[2] ?? '0') >= 5) cents += 1n;
  const sign = negative ? '−' : '';
  if (cents === 0n) return /[1-9]/.test(fraction) ? `${sign}<$0.01` : '$0.00';
  const digits = cents.toString().padStart(3, '0');
  const dollars = BigInt(digits.slice(0, -2)).toLocaleString('en-US');
  return `${sign}$${dollars}.${digits.slice(-2)}`;
}

/** The exact amount as the API gave it, for a title: "$0.0012345678", "−$12.5". */
export function exactUsd(amount: string | number): string {
  const exact = typeof amount === 'number' ? numberText(amount) : amount.trim();
  return exact.startsWith('-') ? `−$${exact.slice(1)}` : `$${exact.replace(/^\+/, '')}`;
}

/** A number's shortest decimal form, never exponent notation (1e-7 is "0.0000001"). */
function numberText(value: number): string {
  const text = String(value);
  if (!/e/i.test(text)) return text;
  return value.toFixed(20).replace(/0+$/, '').replace(/\.$/, '');
}

/**
 * The exact sum of decimal strings (money never goes through a float): scaled to integers of
 * the longest fraction, added as BigInt.
 */
export function sumDecimals(values: string[]): string {
  const places = Math.max(0, ...values.map((value) => (value.split('.')[1] ?? '').length));
  let total = 0n;
  for (const value of values) {
    const negative = value.startsWith('-');
    const [whole, fraction = ''] = value.replace('-', '').split('.');
    const scaled = BigInt(whole + fraction.padEnd(places, '0'));
    total += negative ? -scaled : scaled;
  }
  const negative = total < 0n;
  const digits = (negative ? -total : total).toString().padStart(places + 1, '0');
  const whole = digits.slice(0, digits.length - places);
  const fraction = digits.slice(digits.length - places).replace(/0+$/, '');
  return `${negative ? '-' : ''}${whole}${fraction ? `.${fraction}` : ''}`;
}

export function formatTime(iso: string | null | undefined): string {
  return iso ? new Date(iso).toLocaleString() : '—';
}
