import { Command, Option } from 'commander';
import { graphql } from '../graphql-client';
import { OPERATIONS } from '../operations';
import { type CommonOptions, connectionOf, decimal, wholeNumber, withConnection } from '../options';
import { fields, printJson, table } from '../output';

interface Workspace {
  id: string;
  name: string;
  creditBalance: string | null;
  createdAt: string;
  deletedAt: string | null;
}

interface CreateWorkspacePayload {
  workspace: Workspace;
  apiKey: { id: string; name: string; displayPrefix: string };
  plaintext: string;
}

/** `workspace create|list`: operator commands (OPERATOR_TOKEN). */
export function workspaceCommand(): Command {
  const workspace = new Command('workspace').description('workspaces (operator: OPERATOR_TOKEN)');

  withConnection(workspace.command('create <name>'), 'operator')
    .description('create a workspace and its first API key (the key is printed this once)')
    .addOption(new Option('--credit <amount>', 'prepaid credit in USD (exact decimal); without it the workspace is postpaid').argParser(decimal))
    .addOption(new Option('--local-replicas <count>', 'let it run this many replicas on the server host\'s local capacity (the local_replicas budget; 0 by default)')
      .argParser(wholeNumber(0)))
    .action(async (name: string, options: CommonOptions & { credit?: string; localReplicas?: number }) => {
      const { connection, output } = connectionOf(options, 'operator');
      const { createWorkspace } = await graphql<{ createWorkspace: CreateWorkspacePayload }>(connection, OPERATIONS.createWorkspace, { name, creditBalance: options.credit ?? null });
      let localReplicas: number | undefined;
      if (options.localReplicas !== undefined) {
        const { setWorkspaceBudget } = await graphql<{ setWorkspaceBudget: Array<{ budget: string; scope: string; limit: number }> }>(
          connection, OPERATIONS.setLocalReplicas, { workspaceId: createWorkspace.workspace.id, value: options.localReplicas });
        localReplicas = setWorkspaceBudget.find((row) => row.budget === 'local_replicas' && row.scope === 'workspace')?.limit ?? options.localReplicas;
      }
      if (output.json) {
        printJson(output, localReplicas === undefined ? createWorkspace : { ...createWorkspace, localReplicas });
        return;
      }
      output.write(fields([
        ['workspace', createWorkspace.workspace.id],
        ['name', createWorkspace.workspace.name],
        ['credit', createWorkspace.workspace.creditBalance ?? 'postpaid'],
        ...(localReplicas === undefined ? [] : [['local replicas', localReplicas] as [string, unknown]]),
        ['key id', createWorkspace.apiKey.id],
        ['API key', createWorkspace.plaintext],
      ]));
      output.write('The API key is shown this once: store it now (PLATFORM_API_KEY).\n');
    });

  withConnection(workspace.command('list'), 'operator')
    .description('list workspaces with their prepaid credit, oldest first')
    .option('--include-deleted', 'include deleted workspaces')
    .action(async (options: CommonOptions & { includeDeleted?: boolean }) => {
      const { connection, output } = connectionOf(options, 'operator');
      const { workspaces } = await graphql<{ workspaces: Workspace[] }>(connection, OPERATIONS.workspaces, { includeDeleted: Boolean(options.includeDeleted) });
      if (output.json) return printJson(output, workspaces);
      output.write(table(workspaces, [
        { header: 'id', value: (row) => row.id },
        { header: 'name', value: (row) => row.name },
        { header: 'credit', value: (row) => row.creditBalance ?? 'postpaid' },
        { header: 'created', value: (row) => row.createdAt },
        { header: 'deleted', value: (row) => row.deletedAt },
      ]));
    });

  return workspace;
}
