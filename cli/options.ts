import { type Command, InvalidArgumentError, Option } from 'commander';
import { UsageError } from './errors';
import type { Connection } from './graphql-client';
import { type Output, stdoutOutput } from './output';

export const DEFAULT_URL = 'http://127.0.0.1:8080';

/**
 * Who a command acts as: a workspace (its API key, PLATFORM_API_KEY) or the operator
 * (OPERATOR_TOKEN, the server's operator token). Both are sent as `Authorization: Bearer`.
 */
export type Caller = 'workspace' | 'operator';

const TOKEN_ENV: Record<Caller, string> = { workspace: 'PLATFORM_API_KEY', operator: 'OPERATOR_TOKEN' };

export interface CommonOptions {
  url: string;
  token?: string;
  json?: boolean;
}

/**
 * Every command that calls the server takes the same three options, declared on the command
 * itself (so they may come anywhere on its line, and its --help lists them with their
 * variables): --url (PLATFORM_URL), --token (PLATFORM_API_KEY, or OPERATOR_TOKEN for operator
 * commands) and --json.
 */
export function withConnection(command: Command, caller: Caller): Command {
  return command
    .addOption(new Option('--url <url>', 'the server\'s base URL').env('PLATFORM_URL').default(DEFAULT_URL))
    .addOption(new Option('--token <token>', caller === 'operator' ? 'the operator token' : 'a workspace API key (mk-…)').env(TOKEN_ENV[caller]))
    .option('--json', 'print JSON for scripts instead of tables');
}

/** The connection and output of a command's parsed options; a missing token is a usage error. */
export function connectionOf(options: CommonOptions, caller: Caller): { connection: Connection; output: Output } {
  if (!options.token) {
    throw new UsageError(`no ${caller === 'operator' ? 'operator token' : 'API key'}: pass --token or set ${TOKEN_ENV[caller]}`);
  }
  let url: URL;
  try {
    url = new URL(options.url);
  } catch {
    throw new UsageError(`--url / PLATFORM_URL is not a URL: ${options.url}`);
  }
  return { connection: { url: url.toString().replace(/\/+$/, ''), token: options.token }, output: stdoutOutput(Boolean(options.json)) };
}

/** commander argument parser: a whole number, at least `min`. */
export function wholeNumber(min = 0): (value: string) => number {
  return (value) => {
    if (!/^\d+$/.test(value) || Number(value) < min || !Number.isSafeInteger(Number(value))) {
      throw new InvalidArgumentError(`expected a whole number of at least ${min}`);
    }
    return Number(value);
  };
}

/** commander argument parser: a decimal number (kept as the string typed, for exact money). */
export function decimal(value: string): string {
  if (!/^\d+(\.\d+)?$/.test(value)) throw new InvalidArgumentError('expected a decimal number, e.g. 12.5');
  return value;
}

/** commander argument parser: a positive number (a price per hour). */
export function positiveNumber(value: string): number {
  const number = Number(value);
  if (value.trim() === '' || !Number.isFinite(number) || number <= 0) throw new InvalidArgumentError('expected a number above 0');
  return number;
}
