import { exactUsd, formatUsd } from './format';

/**
 * A USD amount shown to the cent; when it has more digits than that (a ledger keeps ten), the
 * exact amount is its title, shown on hover and read by assistive technology as its description.
 */
export function Money({ amount }: { amount: string | number }) {
  const exact = exactUsd(amount);
  const fraction = exact.split('.')[1] ?? '';
  return <span className="money" title={/[1-9]/.test(fraction.slice(2)) ? exact : undefined}>{formatUsd(amount)}</span>;
}
