import { Command, Option } from 'commander';
import { UsageError } from '../errors';
import { graphql } from '../graphql-client';
import { OPERATIONS } from '../operations';
import { type CommonOptions, connectionOf, positiveNumber, wholeNumber, withConnection } from '../options';
import { fields, type Output, printJson, table } from '../output';
import { followEvents } from './deployment-events';
import { decisionTable, type Deployment, type ScalingDecision } from './deployment-fields';

interface Replica {
  id: string;
  status: string;
  statusReason: string | null;
  provider: string;
  engineKind: string | null;
  createdAt: string;
  terminatedAt: string | null;
}

const TRANSITIONS = {
  pause: ['pauseDeployment', 'pause a deployment: its endpoint answers 503, replicas are released and billing stops'],
  resume: ['resumeDeployment', 'resume a paused deployment: replicas are placed again (it goes through Creating)'],
  delete: ['deleteDeployment', 'delete a deployment: its endpoint answers 404, replicas are released, its batches are cancelled'],
} as const;

/** `deployment list|get|create|scale|pause|resume|delete|events`: the workspace's deployments (PLATFORM_API_KEY). */
export function deploymentCommand(): Command {
  const deployment = new Command('deployment').description('deployments of the workspace');

  withConnection(deployment.command('list'), 'workspace')
    .description('list the workspace\'s deployments (deleted ones excluded)')
    .action(async (options: CommonOptions) => {
      const { connection, output } = connectionOf(options, 'workspace');
      const { deployments } = await graphql<{ deployments: Deployment[] }>(connection, OPERATIONS.deployments);
      if (output.json) return printJson(output, deployments);
      output.write(table(deployments, [
        { header: 'id', value: (row) => row.id },
        { header: 'slug', value: (row) => row.slug },
        { header: 'model', value: (row) => row.modelId },
        { header: 'status', value: (row) => row.status },
        { header: 'replicas', value: (row) => `${row.desiredReplicas} (${row.minReplicas}-${row.maxReplicas}${row.autoscale ? ', autoscale' : ''})` },
        { header: 'provider', value: (row) => row.provider },
        { header: 'base url', value: (row) => row.baseUrl },
      ]));
    });

  withConnection(deployment.command('get <id>'), 'workspace')
    .description('show a deployment with its replicas and latest scaling decisions')
    .addOption(new Option('--decisions <count>', 'scaling decisions to show, newest first').argParser(wholeNumber(0)).default(5))
    .action(async (id: string, options: CommonOptions & { decisions: number }) => {
      const { connection, output } = connectionOf(options, 'workspace');
      const { deployment: found } = await graphql<{ deployment: Deployment & { replicas: Replica[]; scalingDecisions: ScalingDecision[] } }>(
        connection, OPERATIONS.deployment, { id, limit: options.decisions });
      if (output.json) return printJson(output, found);
      const { replicas, scalingDecisions, ...rest } = found;
      printDeployment(output, rest);
      output.write('\nreplicas:\n');
      output.write(table(replicas, [
        { header: 'id', value: (row) => row.id },
        { header: 'status', value: (row) => row.status },
        { header: 'provider', value: (row) => row.provider },
        { header: 'engine', value: (row) => row.engineKind },
        { header: 'created', value: (row) => row.createdAt },
        { header: 'reason', value: (row) => row.statusReason },
      ]));
      output.write('\nscaling decisions:\n');
      output.write(decisionTable(scalingDecisions));
    });

  withConnection(deployment.command('create <model-id>'), 'workspace')
    .description('create a deployment of a catalog model and place its minimum replicas')
    .addOption(new Option('--price-cap <usd>', 'the most a replica-hour may cost').argParser(positiveNumber).makeOptionMandatory())
    .addOption(new Option('--min <count>', 'minimum replicas').argParser(wholeNumber(0)).default(1))
    .addOption(new Option('--max <count>', 'maximum replicas').argParser(wholeNumber(1)).default(1))
    .option('--autoscale', 'let the autoscaler choose between --min and --max', false)
    .addOption(new Option('--provider <provider>', 'local, market, static, kubernetes or external').default('local'))
    .addOption(new Option('--routing-policy <policy>', 'prefix-aware, least-loaded or round-robin (the server\'s default when left out)'))
    .action(async (modelId: string, options: CommonOptions & { priceCap: number; min: number; max: number; autoscale: boolean; provider: string; routingPolicy?: string }) => {
      const { connection, output } = connectionOf(options, 'workspace');
      const input = {
        modelId, priceCapPerHour: options.priceCap, minReplicas: options.min, maxReplicas: options.max, autoscale: options.autoscale,
        provider: options.provider, routingPolicy: options.routingPolicy,
      };
      const { createDeployment } = await graphql<{ createDeployment: { deployment: Deployment; joinToken: string | null } }>(connection, OPERATIONS.createDeployment, { input });
      if (output.json) return printJson(output, createDeployment);
      printDeployment(output, createDeployment.deployment);
      if (createDeployment.joinToken) output.write(`join token (shown this once; agents join with WORKER_JOIN_TOKEN): ${createDeployment.joinToken}\n`);
    });

  withConnection(deployment.command('scale <id>'), 'workspace')
    .description('change a deployment\'s replica range (and autoscale); in-flight requests are not dropped')
    .addOption(new Option('--min <count>', 'minimum replicas').argParser(wholeNumber(0)))
    .addOption(new Option('--max <count>', 'maximum replicas').argParser(wholeNumber(1)))
    .option('--autoscale', 'turn autoscaling on')
    .option('--no-autoscale', 'turn autoscaling off (the deployment keeps --min replicas)')
    .action(async (id: string, options: CommonOptions & { min?: number; max?: number; autoscale?: boolean }) => {
      if (options.min === undefined && options.max === undefined && options.autoscale === undefined) {
        throw new UsageError('deployment scale: give --min, --max or --autoscale/--no-autoscale');
      }
      const { connection, output } = connectionOf(options, 'workspace');
      const input = { minReplicas: options.min, maxReplicas: options.max, autoscale: options.autoscale };
      const { updateDeployment } = await graphql<{ updateDeployment: Deployment }>(connection, OPERATIONS.updateDeployment, { id, input });
      if (output.json) return printJson(output, updateDeployment);
      printDeployment(output, updateDeployment);
    });

  for (const [name, [mutation, description]] of Object.entries(TRANSITIONS)) {
    withConnection(deployment.command(`${name} <id>`), 'workspace')
      .description(description)
      .action(async (id: string, options: CommonOptions) => {
        const { connection, output } = connectionOf(options, 'workspace');
        const result = (await graphql<Record<string, Deployment>>(connection, OPERATIONS[mutation], { id }))[mutation];
        if (output.json) return printJson(output, result);
        output.write(`${result.id} ${result.status}${result.statusReason ? ` (${result.statusReason})` : ''}\n`);
      });
  }

  withConnection(deployment.command('events <id>'), 'workspace')
    .description('print a deployment\'s latest scaling decisions and its state; with --follow, keep printing its updates '
      + '(the deploymentUpdated subscription) and new scaling decisions until interrupted (Ctrl-C)')
    .option('-f, --follow', 'keep following until interrupted')
    .addOption(new Option('--limit <count>', 'scaling decisions to print first, newest last').argParser(wholeNumber(0)).default(10))
    .addOption(new Option('--interval <ms>', 'with --follow: how often scaling decisions are read (they come with no event)').argParser(wholeNumber(100)).default(5000))
    .action(async (id: string, options: CommonOptions & { follow?: boolean; limit: number; interval: number }) => {
      const { connection, output } = connectionOf(options, 'workspace');
      await followEvents(connection, output, { id, follow: Boolean(options.follow), limit: options.limit, intervalMs: options.interval });
    });

  return deployment;
}

function printDeployment(output: Output, deployment: Deployment): void {
  output.write(fields([
    ['id', deployment.id],
    ['slug', deployment.slug],
    ['model', deployment.modelId],
    ['status', deployment.statusReason ? `${deployment.status} (${deployment.statusReason})` : deployment.status],
    ['provider', deployment.provider],
    ['replicas', `${deployment.desiredReplicas} desired, min ${deployment.minReplicas}, max ${deployment.maxReplicas}${deployment.autoscale ? ', autoscale' : ''}`],
    ['price cap', `${deployment.priceCapPerHour}/h`],
    ['routing', deployment.routingPolicy],
    ['base url', deployment.baseUrl],
    ['updated', deployment.updatedAt],
  ]));
}
