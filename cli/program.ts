import fs from 'node:fs';
import path from 'node:path';
import { Command } from 'commander';
import { batchCommand } from './commands/batch';
import { deploymentCommand } from './commands/deployment';
import { keyCommand } from './commands/key';
import { workspaceCommand } from './commands/workspace';
import { DEFAULT_URL } from './options';

export const CLI_NAME = 'inference-platform';

const ENVIRONMENT = `
Environment variables (each option wins over its variable):
  PLATFORM_URL      the server's base URL (--url; default ${DEFAULT_URL})
  PLATFORM_API_KEY  a workspace API key (--token) for key, deployment and batch commands
  OPERATOR_TOKEN    the server's operator token (--token) for workspace commands

Exit codes: 0 done; 1 the server returned an error (its code and message are printed on stderr)
or could not be reached; 2 a usage error (unknown command or option, a missing argument or token).
Every command takes --help. Docs: docs/cli.md.`;

/** The whole command tree; `exitOverride` (inherited by every subcommand) turns commander's exits into CommanderErrors main() maps to exit codes. */
export function buildProgram(): Command {
  const program = new Command(CLI_NAME)
    .description('The inference platform from the command line: workspaces, API keys, deployments and batches over the GraphQL API')
    .version(packageVersion(), '-V, --version')
    .exitOverride()
    .showHelpAfterError('(add --help for usage)')
    .showSuggestionAfterError(true)
    .addHelpText('after', ENVIRONMENT);
  for (const command of [workspaceCommand(), keyCommand(), deploymentCommand(), batchCommand()]) {
    // Subcommands created by .command() inherit these; commands built apart are given them here.
    command.exitOverride().showHelpAfterError('(add --help for usage)').showSuggestionAfterError(true).addHelpText('after', ENVIRONMENT);
    for (const leaf of command.commands) leaf.exitOverride().showHelpAfterError('(add --help for usage)').addHelpText('after', ENVIRONMENT);
    program.addCommand(command);
  }
  return program;
}

function packageVersion(): string {
  try {
    // dist/cli/program.js → the package's package.json.
    return (JSON.parse(fs.readFileSync(path.join(__dirname, '..', '..', 'package.json'), 'utf8')) as { version: string }).version;
  } catch {
    return 'unknown';
  }
}
