import { ensureFirstRun } from '../control-plane/workspaces/first-run';
import { firstRunBanner } from './first-run-banner';
import { startServer } from './server';

/** `npm start`: the server process (gateway + control plane) on embedded defaults unless configured. */
async function main(): Promise<void> {
  const startedAt = Date.now();
  const server = await startServer();
  const { controlPlane, gateway, logger } = server;
  const firstRun = await ensureFirstRun(controlPlane);
  process.stdout.write(firstRunBanner(firstRun, gateway.baseUrl, `${gateway.publicUrl}/graphql`));
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
}

main().catch((error) => {
  console.error(error instanceof Error ? error.message : error);
  process.exit(1);
});
