import { Command, Option } from 'commander';
import { graphql } from '../graphql-client';
import { OPERATIONS } from '../operations';
import { type CommonOptions, connectionOf, wholeNumber, withConnection } from '../options';
import { fields, printJson, table } from '../output';

interface ApiKey {
  id: string;
  name: string;
  displayPrefix: string;
  rpmLimit: number;
  tpdLimit: number;
  createdAt: string;
  regeneratedAt: string | null;
}

/** `key create|list|revoke`: the workspace's API keys (PLATFORM_API_KEY). */
export function keyCommand(): Command {
  const key = new Command('key').description('API keys of the workspace');

  withConnection(key.command('create <name>'), 'workspace')
    .description('create an API key (its plaintext is printed this once)')
    .addOption(new Option('--rpm <limit>', 'requests per minute (the server\'s default when left out)').argParser(wholeNumber(1)))
    .addOption(new Option('--tpd <limit>', 'tokens per UTC day (the server\'s default when left out)').argParser(wholeNumber(1)))
    .action(async (name: string, options: CommonOptions & { rpm?: number; tpd?: number }) => {
      const { connection, output } = connectionOf(options, 'workspace');
      const { createApiKey } = await graphql<{ createApiKey: { apiKey: ApiKey; plaintext: string } }>(
        connection, OPERATIONS.createApiKey, { input: { name, rpmLimit: options.rpm, tpdLimit: options.tpd } });
      if (output.json) return printJson(output, createApiKey);
      output.write(fields([
        ['key id', createApiKey.apiKey.id], ['name', createApiKey.apiKey.name], ['rpm limit', createApiKey.apiKey.rpmLimit],
        ['tpd limit', createApiKey.apiKey.tpdLimit], ['API key', createApiKey.plaintext],
      ]));
      output.write('The API key is shown this once: store it now.\n');
    });

  withConnection(key.command('list'), 'workspace')
    .description('list the workspace\'s active keys (never their plaintext)')
    .action(async (options: CommonOptions) => {
      const { connection, output } = connectionOf(options, 'workspace');
      const { apiKeys } = await graphql<{ apiKeys: ApiKey[] }>(connection, OPERATIONS.apiKeys);
      if (output.json) return printJson(output, apiKeys);
      output.write(table(apiKeys, [
        { header: 'id', value: (row) => row.id },
        { header: 'name', value: (row) => row.name },
        { header: 'prefix', value: (row) => row.displayPrefix },
        { header: 'rpm', value: (row) => row.rpmLimit },
        { header: 'tpd', value: (row) => row.tpdLimit },
        { header: 'created', value: (row) => row.createdAt },
      ]));
    });

  withConnection(key.command('revoke <id>'), 'workspace')
    .description('revoke a key at once (its open subscriptions are closed)')
    .action(async (id: string, options: CommonOptions) => {
      const { connection, output } = connectionOf(options, 'workspace');
      const { revokeApiKey } = await graphql<{ revokeApiKey: ApiKey }>(connection, OPERATIONS.revokeApiKey, { id });
      if (output.json) return printJson(output, revokeApiKey);
      output.write(`revoked ${revokeApiKey.id} (${revokeApiKey.name})\n`);
    });

  return key;
}
