import { ConfigError, DataDirInUseError, DeploymentEngines, ensureFirstRun } from '../control-plane/api/startup';
import { firstRunBanner } from './first-run-banner';
import { startServer, type Server } from './server';
import { CONSOLE_PATH } from './http/console.route';
import { watchParentPipe } from '../common/parent-pipe';
import { standInDeployments } from './stand-in-engine';
import { EXIT, parseServerArgs, serverHelp, serverVersion } from './server-cli';

/** `npm start`: the server process (gateway + control plane) on embedded defaults unless configured. */
async function main(argv: readonly string[]): Promise<void> {
  const command = parseServerArgs(argv);
  if (command.kind === 'help') return void process.stdout.write(serverHelp());
  if (command.kind === 'version') return void process.stdout.write(serverVersion());
  if (command.kind === 'bad') {
    process.stderr.write(`${command.message}\n`);
    process.exitCode = EXIT.badUsage;
    return;
  }
  const startedAt = Date.now();
  // A signal during the start (a pod stopped while migrations run) is kept and acted on once the
  // server can drain: the handlers are in place from the first moment, so the default (die at once) never runs.
  let pending: { reason: string; exitCode?: number } | null = null;
  let shutdown: (reason: string, exitCode?: number) => void = (reason, exitCode) => {
    if (pending && (reason === 'SIGINT' || reason === 'SIGTERM')) process.exit(EXIT.forced);
    pending ??= { reason, exitCode };
  };
  process.on('SIGINT', () => shutdown('SIGINT'));
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  let server: Server;
  try {
    server = await startServer({ onDatabaseLost: () => shutdown('database lost', EXIT.databaseLost) });
  } catch (error) {
    if (error instanceof DataDirInUseError) {
      process.stderr.write(`${error.message}\n`);
      process.exit(EXIT.dataDirInUse);
    }
    if (error instanceof ConfigError) {
      process.stderr.write(`${error.message}\n`);
      process.exit(EXIT.badUsage);
    }
    throw error;
  }
  const { controlPlane, gateway, logger } = server;
  const firstRun = await ensureFirstRun(controlPlane);
  const engines = new DeploymentEngines(controlPlane.replicas, controlPlane.localProvider);
  const standIn = await standInDeployments(engines, firstRun.created ? [firstRun.deployment] : firstRun.deployments);
  const consoleUrl = `${gateway.publicUrl}${CONSOLE_PATH}/`;
  // On the embedded defaults the person at this terminal owns the dev workspace, whose key was shown only once.
  const devWorkspace = server.embeddedDatabase ? await controlPlane.workspaces.first() : null;
  const link = devWorkspace ? await controlPlane.signInLinks.issue(devWorkspace.id) : null;
  process.stdout.write(firstRunBanner(firstRun, gateway.baseUrl, `${gateway.publicUrl}/graphql`, (deployment) => standIn.has(deployment.id), {
    url: consoleUrl,
    // In the fragment: browsers never send it, so it reaches no access log or proxy.
    signInLink: link ? { url: `${consoleUrl}#sign-in=${link.token}`, expiresAt: link.expiresAt } : undefined,
  }));
  logger.info({ http: gateway.url, grpc: controlPlane.agentServer.port, embeddedDatabase: server.embeddedDatabase, startupMs: Date.now() - startedAt }, 'server started');

  const deadlineMs = server.gatewayConfig.shutdownTimeoutMs;
  let signals = 0;
  /** Kills the agents and exits now: past the deadline `code` (1, or 4 when the database was lost), on a second signal 130 as a shell does. */
  const force = (why: string, code: number) => {
    logger.error({ why, shutdownTimeoutMs: deadlineMs }, 'shutdown forced: agents killed');
    controlPlane.capacity.killAgents();
    process.exit(code);
  };
  shutdown = (reason, exitCode = EXIT.ok) => {
    if (++signals > 1) {
      if (reason === 'SIGINT' || reason === 'SIGTERM') force(`a second ${reason}`, EXIT.forced);
      return;
    }
    logger.info({ reason, shutdownTimeoutMs: deadlineMs }, 'shutting down: draining agents, stopping the database');
    // Drain, then force: whatever hangs (an agent that never drains, a database that stopped answering) cannot hold the process past the deadline.
    setTimeout(() => force(`past SHUTDOWN_TIMEOUT_MS (${deadlineMs} ms)`, exitCode === EXIT.ok ? EXIT.failed : exitCode), deadlineMs).unref();
    server.stop().then(() => process.exit(exitCode), (error) => {
      logger.error({ err: error }, 'shutdown failed');
      process.exit(EXIT.failed);
    });
  };
  if (pending) {
    const { reason, exitCode } = pending;
    shutdown(reason, exitCode);
    return;
  }
  // Set by launch.ts, which holds the other end of stdin: its death, however it dies, is a SIGTERM.
  if (process.env.EXIT_WITH_LAUNCHER === 'true') {
    watchParentPipe(process.stdin, (how) => {
      logger.warn({ how }, 'the launcher is gone');
      shutdown('launcher gone');
    });
  }
}

main(process.argv.slice(2)).catch((error) => {
  console.error(error instanceof Error ? error.message : error);
  process.exit(EXIT.failed);
});
