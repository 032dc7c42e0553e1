import pino, { type Logger } from 'pino';
import { type ControlPlane, type ControlPlaneConfig, type ControlPlaneOverrides, DataDirLock, EmbeddedDatabase, gatewayPorts, loadFullControlPlaneConfig, openDatabase, startControlPlane, startTracing, withLimits } from '../control-plane/api/startup';
import { connectionCap } from './http/connection-budget';
import { startGateway, type Gateway } from './app';
import { ROUTE_LABELS } from './route-label';
import { loadGatewayConfig, type GatewayConfig } from './gateway-config';

export interface ServerOptions {
  env?: NodeJS.ProcessEnv;
  controlPlane?: ControlPlaneOverrides;
  gateway?: Partial<GatewayConfig>;
  logger?: Logger;
  /** The embedded PostgreSQL died and could not be restarted: the process should exit for its supervisor (gateway/main.ts). */
  onDatabaseLost?: (error: Error) => void;
}

export interface Server {
  /**
   * The whole control plane: the process's own handle (gateway/main.ts: the first run, the banner, killing agents
   * on a second signal) and, for tests and benches only, the documented test-only handle to the platform behind
   * the door (test/support/test-server.ts, docs/layers.md#the-door). The gateway itself is given only its ports.
   */
  readonly controlPlane: ControlPlane;
  readonly gateway: Gateway;
  readonly logger: Logger;
  /** True when this process started its own embedded PostgreSQL. */
  readonly embeddedDatabase: boolean;
  /** The gateway's settings as loaded (main.ts reads the shutdown deadline). */
  readonly gatewayConfig: GatewayConfig;
  stop(): Promise<void>;
}

/** Gateway + control plane in one process, on an external or an embedded PostgreSQL. */
export async function startServer(options: ServerOptions = {}): Promise<Server> {
  const env = options.env ?? process.env;
  const defaults = loadFullControlPlaneConfig(env);
  const overrides = options.controlPlane ?? {};
  const controlPlaneConfig: ControlPlaneConfig = {
    ...defaults, ...overrides,
    storage: { ...defaults.storage, ...overrides.storage },
    requests: { ...defaults.requests, ...overrides.requests },
    webhooks: { ...defaults.webhooks, ...overrides.webhooks },
    responses: { ...defaults.responses, ...overrides.responses },
    sharing: { ...defaults.sharing, ...overrides.sharing },
    batches: { ...defaults.batches, ...overrides.batches },
    metricsHistory: { ...defaults.metricsHistory, ...overrides.metricsHistory },
    requestLog: { ...defaults.requestLog, ...overrides.requestLog },
    adapters: { ...defaults.adapters, ...overrides.adapters },
    budgets: withLimits(defaults.budgets, overrides.budgets ?? {}),
  };
  const configuredConnections = controlPlaneConfig.budgets.connections.server ?? 0;
  const connections = connectionCap(configuredConnections);
  controlPlaneConfig.budgets = withLimits(controlPlaneConfig.budgets, { connections: { server: connections } });
  const gatewayConfig = { ...loadGatewayConfig(env), ...options.gateway } as GatewayConfig;
  // Off (null) unless OTEL_* configure an exporter; on, every log line made under a request's span names it (trace_id, span_id).
  const tracing = startTracing(controlPlaneConfig.tracing);
  const logger = options.logger ?? pino({ level: gatewayConfig.logLevel, ...(tracing ? { mixin: tracing.logFields } : {}) });
  if (connections < configuredConnections) {
    logger.warn({ configured: configuredConnections, cap: connections }, 'MAX_CONNECTIONS lowered to fit the process\'s open-file limit (ulimit -n) with room for the database, agents and files');
  }

  let lock: DataDirLock | null = null;
  let embedded: EmbeddedDatabase | null = null;
  let dataSource: Awaited<ReturnType<typeof openDatabase>> | null = null;
  let controlPlane: ControlPlane | null = null;
  try {
    if (!controlPlaneConfig.databaseUrl) {
      // First: a second server on the same folder refuses here, before it touches the running one's PostgreSQL.
      lock = DataDirLock.acquire(controlPlaneConfig.dataDir);
      embedded = await EmbeddedDatabase.start({
        dataDir: controlPlaneConfig.dataDir, port: controlPlaneConfig.embeddedDatabasePort, log: (line) => logger.debug({ postgres: line }),
        watchIntervalMs: controlPlaneConfig.embeddedDatabaseWatchMs, restartAttempts: controlPlaneConfig.embeddedDatabaseRestarts,
        onRestarted: (attempts) => logger.warn({ attempts }, 'the embedded PostgreSQL died and was restarted'),
        onLost: (error) => {
          logger.fatal({ err: error }, 'the embedded PostgreSQL died and could not be restarted');
          options.onDatabaseLost?.(error);
        },
      });
    }
    dataSource = await openDatabase(controlPlaneConfig.databaseUrl ?? embedded!.url, { tenantStatementTimeoutMs: controlPlaneConfig.tenantStatementTimeoutMs });
    // Metrics label requests by the gateway's routes: the closed set of their values.
    controlPlane = await startControlPlane(controlPlaneConfig, dataSource, logger, ROUTE_LABELS, tracing);
    const gateway = await startGateway(gatewayPorts(controlPlane), gatewayConfig, logger);
    const running = controlPlane;
    let stopping: Promise<void> | null = null;
    return {
      controlPlane: running, gateway, logger, embeddedDatabase: embedded !== null, gatewayConfig,
      stop() {
        stopping ??= (async () => {
          gateway.beginShutdown();
          // Agents first: their last jobs may still upload outputs through the gateway's file links.
          await running.drainAgents();
          await gateway.stop();
          await running.stop();
          await dataSource!.destroy();
          await embedded?.stop();
          lock?.release();
          // Last: the spans of the requests that ended during the drain go out too.
          await tracing?.shutdown().catch((error) => logger.warn({ err: error }, 'could not export the last spans'));
        })();
        return stopping;
      },
    };
  } catch (error) {
    await controlPlane?.stop().catch(() => {});
    await dataSource?.destroy().catch(() => {});
    await embedded?.stop().catch(() => {});
    lock?.release();
    await tracing?.shutdown().catch(() => {});
    throw error;
  }
}
