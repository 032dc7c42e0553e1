/** How the console writes money and times. */

export function formatUsd(amount: number): string {
  return `$${amount.toFixed(amount !== 0 && Math.abs(amount) < 1 ? 4 : 2)}`;
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
