/** How results are written: a JSON document for scripts (`--json`), tables and key/value lines for people. */
export interface Output {
  json: boolean;
  write(text: string): void;
}

export function stdoutOutput(json: boolean): Output {
  return { json, write: (text) => process.stdout.write(text) };
}

/** The whole result as one JSON document (two-space indented), for `--json`. */
export function printJson(output: Output, value: unknown): void {
  output.write(`${JSON.stringify(value, null, 2)}\n`);
}

/** One JSON object per line (NDJSON): what followers (`deployment events --follow --json`) print. */
export function printJsonLine(output: Output, value: unknown): void {
  output.write(`${JSON.stringify(value)}\n`);
}

export interface Column<T> {
  header: string;
  value: (row: T) => unknown;
}

/** A plain text table: a header row in capitals, columns padded to their widest cell; null and undefined print as `-`. */
export function table<T>(rows: T[], columns: Array<Column<T>>): string {
  const cells = rows.map((row) => columns.map((column) => cell(column.value(row))));
  const headers = columns.map((column) => column.header.toUpperCase());
  const widths = headers.map((header, index) => Math.max(header.length, ...cells.map((row) => row[index].length)));
  const line = (values: string[]) => values.map((value, index) => (index === values.length - 1 ? value : value.padEnd(widths[index]))).join('  ').trimEnd();
  return `${[line(headers), ...cells.map(line)].join('\n')}\n`;
}

/** `key: value` lines, keys aligned. */
export function fields(pairs: Array<[string, unknown]>): string {
  const width = Math.max(...pairs.map(([key]) => key.length));
  return `${pairs.map(([key, value]) => `${`${key}:`.padEnd(width + 1)} ${cell(value)}`).join('\n')}\n`;
}

export function cell(value: unknown): string {
  if (value === null || value === undefined) return '-';
  if (typeof value === 'object') return JSON.stringify(value);
  return String(value);
}
