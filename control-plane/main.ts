import type { DataSource } from 'typeorm';
import type { Logger } from 'pino';
import { ApiKeyService } from './api-keys/api-key.service';
import { Catalog } from './catalog/catalog';
import { DEFAULT_AGENT_ENTRY, type ControlPlaneConfig } from './config/control-plane-config';
import { DeploymentService } from './deployments/deployment.service';
import { DeploymentStore } from './deployments/deployment-store';
import { AgentServer } from './dispatch/agent-server';
import { Dispatcher } from './dispatch/dispatcher';
import { ClusterNotifier } from './events/cluster-notifier';
import { ControlPlaneEvents } from './events/control-plane-events';
import type { CapacityProvider } from './providers/capacity-provider';
import { Lifecycle } from './lifecycle';
import { LocalProvider } from './providers/local-provider';
import { createRateLimiter } from './rate-limits/create-rate-limiter';
import type { RateLimiter } from './rate-limits/rate-limit-decision';
import { ReplicaManager } from './replicas/replica-manager';
import { UsageRecorder } from './usage/usage-recorder';
import { WorkspaceService } from './workspaces/workspace.service';

/** Everything the gateway calls; built in one place from one config object. */
export interface ControlPlane {
  readonly config: ControlPlaneConfig;
  readonly dataSource: DataSource;
  readonly catalog: Catalog;
  readonly events: ControlPlaneEvents;
  readonly notifier: ClusterNotifier;
  readonly workspaces: WorkspaceService;
  readonly apiKeys: ApiKeyService;
  readonly deploymentStore: DeploymentStore;
  readonly deployments: DeploymentService;
  readonly replicas: ReplicaManager;
  readonly dispatcher: Dispatcher;
  readonly agentServer: AgentServer;
  readonly usage: UsageRecorder;
  readonly rateLimiter: RateLimiter;
  readonly localProvider: LocalProvider | null;
  /** `host:port` agents on this machine dial. */
  readonly grpcAddress: string;
  stop(): Promise<void>;
}

/** Builds the control plane on an open, migrated database and starts its gRPC server and replicas. */
export async function startControlPlane(config: ControlPlaneConfig, dataSource: DataSource, logger: Logger): Promise<ControlPlane> {
  const lifecycle = new Lifecycle(logger);
  try {
    return await compose(config, dataSource, logger, lifecycle);
  } catch (error) {
    await lifecycle.stopAll();
    throw error;
  }
}

async function compose(config: ControlPlaneConfig, dataSource: DataSource, logger: Logger, lifecycle: Lifecycle): Promise<ControlPlane> {
  const catalog = Catalog.load();
  const events = new ControlPlaneEvents();
  const notifier = await ClusterNotifier.start(databaseUrlOf(dataSource), dataSource, logger.child({ component: 'cluster' }));
  lifecycle.add('cluster notifier', () => notifier.stop());
  const workspaces = new WorkspaceService(dataSource);
  const apiKeys = new ApiKeyService(dataSource, {
    cacheTtlMs: config.apiKeyCacheTtlMs, defaultRpmLimit: config.defaultRpmLimit, defaultTpdLimit: config.defaultTpdLimit,
  }, notifier);
  const deploymentStore = new DeploymentStore(dataSource, events, notifier);
  const dispatcher = new Dispatcher();
  const providers = new Map<string, CapacityProvider>();
  let grpcAddress = '';
  let replicas: ReplicaManager | undefined;
  const localProvider = config.localAgents
    ? new LocalProvider({
      controlPlaneAddress: () => grpcAddress,
      agentEntry: config.agentEntry ?? DEFAULT_AGENT_ENTRY,
      engine: config.localEngine,
      engineUrl: config.localEngineUrl,
      maxConcurrency: config.localMaxConcurrency,
      restartDelayMs: config.localRestartDelayMs,
      extraEnv: config.localAgentEnv,
      nodeArgs: config.localAgentNodeArgs,
      onAgentExit: (replicaId, reason) => void replicas?.lost(replicaId, reason).catch((error) => logger.error({ err: error }, 'could not record agent exit')),
    }, logger.child({ component: 'local-provider' }))
    : null;
  if (localProvider) providers.set('local', localProvider);
  replicas = new ReplicaManager(dataSource, deploymentStore, providers, logger.child({ component: 'replicas' }));
  const deployments = new DeploymentService(deploymentStore, replicas, catalog);
  const usage = new UsageRecorder(dataSource, config.usageFlushIntervalMs, logger.child({ component: 'usage' }));
  lifecycle.add('usage recorder', () => usage.stop());
  const rateLimiter = await createRateLimiter(config, (apiKeyId, since) => usage.tokensSince(apiKeyId, since), logger.child({ component: 'rate-limits' }));
  lifecycle.add('rate limiter', () => rateLimiter.close?.());
  const agentServer = new AgentServer({
    host: config.grpcHost, port: config.grpcPort,
    helloTimeoutMs: config.helloTimeoutMs, heartbeatIntervalMs: config.heartbeatIntervalMs,
  }, dispatcher, replicas, logger.child({ component: 'agent-server' }));
  const port = await agentServer.start();
  lifecycle.add('agent server', () => agentServer.stop());
  grpcAddress = `127.0.0.1:${port}`;
  // Local agents are our children: SIGTERM drains them. Remote agents are not told to
  // drain; their streams just end and they reconnect to the next control plane.
  if (localProvider) lifecycle.add('local agents', () => localProvider.stopAll());
  await replicas.reconcile();

  return {
    config, dataSource, catalog, events, notifier, workspaces, apiKeys, deploymentStore, deployments, replicas,
    dispatcher, agentServer, usage, rateLimiter, localProvider, grpcAddress,
    stop: () => lifecycle.stopAll(),
  };
}

function databaseUrlOf(dataSource: DataSource): string {
  const url = (dataSource.options as { url?: string }).url;
  if (!url) throw new Error('the control plane needs a DataSource opened from a URL');
  return url;
}
