import { DeploymentEngines, ensureFirstRun } from '../control-plane/api/startup';
import { firstRunBanner } from './first-run-banner';
import { startServer } from './server';
import { CONSOLE_PATH } from './http/console.route';
import { watchParentPipe } from '../common/parent-pipe';
import { standInDeployments } from './stand-in-engine';

/** `npm start`: the server process (gateway + control plane) on embedded defaults unless configured. */
async function main(): Promise<void> {
  const startedAt = Date.now();
  const server = await startServer();
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

  let signals = 0;
  const shutdown = (signal: string) => {
    if (++signals > 1) {
      controlPlane.capacity.killAgents();
      process.exit(130);
    }
    logger.info({ signal }, 'shutting down: draining agents, stopping the database');
    server.stop().then(() => process.exit(0), (error) => {
      logger.error({ err: error }, 'shutdown failed');
      process.exit(1);
    });
  };
  process.on('SIGINT', () => shutdown('SIGINT'));
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  // Set by launch.ts, which holds the other end of stdin: its death, however it dies, is a SIGTERM.
  if (process.env.EXIT_WITH_LAUNCHER === 'true') {
    watchParentPipe(process.stdin, (how) => {
      logger.warn({ how }, 'the launcher is gone');
      shutdown('launcher gone');
    });
  }
}

main().catch((error) => {
  console.error(error instanceof Error ? error.message : error);
  process.exit(1);
});
