import fs from 'node:fs';
import path from 'node:path';
import { controlPlaneSettingRows, PROJECT_ROOT, type SettingRow, settingRows, type SettingsDeclaration } from '../control-plane/api/startup';
import { GATEWAY_SETTINGS } from './gateway-config';

/**
 * The server's exit codes (docs/operating.md): what a supervisor or a script can tell apart.
 * 1 is anything unexpected, and a shutdown that passed SHUTDOWN_TIMEOUT_MS and was forced.
 */
export const EXIT = {
  ok: 0,
  failed: 1,
  /** An unknown flag, or a setting the configuration refuses. */
  badUsage: 2,
  /** Another live server holds DATA_DIR: nothing was touched. */
  dataDirInUse: 3,
  /** The embedded PostgreSQL died and could not be restarted. */
  databaseLost: 4,
  /** A second SIGINT or SIGTERM during shutdown: stopped at once, as a shell's 128 + SIGINT. */
  forced: 130,
} as const;

/** What the command line asked for: run the server, print help or the version, or refuse a flag. */
export type ServerCommand = { readonly kind: 'run' } | { readonly kind: 'help' } | { readonly kind: 'version' } | { readonly kind: 'bad'; readonly message: string };

/**
 * The server takes no flags but these two: every setting is an environment variable (listed by
 * `--help`), so a flag it does not know is a mistake to say, not to ignore (a `--port 9000` that
 * started a server on 8080 over ./data was the trap).
 */
export function parseServerArgs(argv: readonly string[]): ServerCommand {
  if (argv.length === 0) return { kind: 'run' };
  if (argv.length === 1 && (argv[0] === '--help' || argv[0] === '-h')) return { kind: 'help' };
  if (argv.length === 1 && (argv[0] === '--version' || argv[0] === '-v')) return { kind: 'version' };
  const unknown = argv.find((arg) => !['--help', '-h', '--version', '-v'].includes(arg)) ?? argv.join(' ');
  return { kind: 'bad', message: `unknown option '${unknown.slice(0, 80)}': the server takes only --help and --version; every setting is an environment variable (see --help)` };
}

/** `--version`: the package's version and the Node it runs on. */
export function serverVersion(): string {
  const { name, version } = JSON.parse(fs.readFileSync(path.join(PROJECT_ROOT, 'package.json'), 'utf8')) as { name: string; version: string };
  return `${name} ${version} (server, Node ${process.version})\n`;
}

/** `--help`: usage, exit codes, and every setting with its variable and default, grouped as the loaders declare them. */
export function serverHelp(): string {
  const rows: SettingRow[] = [...settingRows(GATEWAY_SETTINGS as unknown as SettingsDeclaration), ...controlPlaneSettingRows()];
  const width = Math.max(...rows.map((row) => row.env.length)) + 2;
  const lines = [
    'usage: npm start  (or: node dist/gateway/main.js [--help | --version])',
    '',
    'The server (gateway + control plane) is configured by environment variables only; with none',
    'set it runs on embedded defaults: an embedded PostgreSQL in ./data and one CPU stand-in',
    'deployment. What each setting means: docs/configuration.md. Traces (off by default) take',
    'the standard OTEL_* variables: docs/tracing.md.',
    '',
    'Exit codes: 0 stopped cleanly, 1 failed (or a shutdown forced past SHUTDOWN_TIMEOUT_MS),',
    '2 bad option or setting, 3 DATA_DIR in use by another server, 4 the embedded database died,',
    '130 a second SIGINT or SIGTERM stopped it at once.',
  ];
  let group = '';
  for (const row of rows) {
    if (row.group !== group) {
      group = row.group;
      lines.push('', `${group}:`);
    }
    lines.push(`  ${row.env.padEnd(width)}${row.default === undefined ? '(unset)' : `default ${row.default === '' ? '""' : row.default}`}`);
  }
  return `${lines.join('\n')}\n`;
}
