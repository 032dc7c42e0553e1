#!/usr/bin/env node
/**
 * The platform CLI: `node dist/cli/main.js <command> …` (`npm run cli -- …`, or the package's
 * `inference-platform` binary). It speaks to a server only over HTTP: GraphQL at /graphql (and
 * graphql-ws for `deployment events --follow`), and the OpenAI-compatible /d/<slug>/v1 files
 * and batches endpoints for `batch upload`. Exit codes (docs/cli.md): 0 done, 1 an error the
 * server returned (or no server to reach), 2 a usage error.
 */
import { CommanderError } from 'commander';
import { EXIT_OK, EXIT_SERVER_ERROR, EXIT_USAGE, renderServerError, ServerError, UsageError } from './errors';
import { buildProgram, CLI_NAME } from './program';

async function main(argv: string[]): Promise<number> {
  const program = buildProgram();
  try {
    await program.parseAsync(argv, { from: 'user' });
    return EXIT_OK;
  } catch (error) {
    // commander printed its message already; --help and --version end as CommanderErrors with exit code 0.
    if (error instanceof CommanderError) return error.exitCode === 0 ? EXIT_OK : EXIT_USAGE;
    if (error instanceof UsageError) {
      process.stderr.write(`error: ${error.message}\n`);
      return EXIT_USAGE;
    }
    if (error instanceof ServerError) {
      process.stderr.write(`${renderServerError(error)}\n`);
      return EXIT_SERVER_ERROR;
    }
    throw error;
  }
}

main(process.argv.slice(2)).then(
  (exitCode) => {
    // Let stdout drain (a pipe) before exiting: a large --json document is written asynchronously.
    process.exitCode = exitCode;
    setImmediate(() => process.exit(exitCode)).unref();
  },
  (error: unknown) => {
    process.stderr.write(`${CLI_NAME} failed: ${(error as Error)?.stack ?? String(error)}\n`);
    process.exit(1);
  },
);
