/**
 * Column transformers for PostgreSQL `numeric` and `bigint`: node-postgres returns them as
 * strings (they may not fit a double); every value the platform keeps in them does. Not for
 * money (balances, ledger amounts): those stay decimal strings (billing/money.ts).
 */
export const numeric = { to: (value: number) => value, from: (value: string) => Number(value) };

export const nullableNumeric = { to: (value: number | null) => value, from: (value: string | null) => (value === null ? null : Number(value)) };
