import type { DataSource } from 'typeorm';
import type { Logger } from 'pino';
import { Metering } from '../billing/metering';
import type { Catalog } from '../catalog/catalog';
import { platformVersion } from '../../common/agent-binary';
import { DEFAULT_AGENT_BINARY_DIR, DEFAULT_AGENT_ENTRY } from '../config/control-plane-config';
import type { ControlPlaneConfig } from '../full-config';
import type { Deployment } from '../deployments/deployment.entity';
import type { DeploymentStore } from '../deployments/deployment-store';
import type { CapacityProvider, HostLostListener } from '../replicas/capacity-provider';
import { localEngineEnv } from '../providers/local-engine-env';
import { LocalProvider } from '../providers/local-provider';
import type { KubernetesProvider } from '../providers/kubernetes/kubernetes-provider';
import { ReplicaManager } from '../replicas/replica-manager';
import { ReplicaQuota } from '../replicas/replica-quota';
import type { ReplicaLogs } from '../replicas/replica-logs';
import type { StoredQuotas } from '../budgets/stored-quota';
import { MarketProvider } from './market-provider';
import { StaticProvider } from './static-provider';

export interface Capacity {
  readonly providers: ReadonlyMap<string, CapacityProvider>;
  /** Agents spawned on this machine for `local` deployments (null with LOCAL_AGENTS=false). */
  readonly localProvider: LocalProvider | null;
  /** The simulated marketplace (its machines are agent processes on this host). */
  readonly market: MarketProvider | null;
  readonly staticHosts: StaticProvider;
  /** Replicas as pods of a cluster (KUBERNETES_CONFIG_FILE); null when not configured. Its watch starts with `startKubernetes`. */
  readonly kubernetes: KubernetesProvider | null;
  readonly metering: Metering;
  readonly replicas: ReplicaManager;
  /** Every agent process this server spawned, local and market (drained on shutdown). */
  stopAgents(): Promise<void>;
  killAgents(): void;
}

/** The GPU capacity side: providers and their offers, replica placement, and metering. */
export function startCapacity(
  config: ControlPlaneConfig, dataSource: DataSource, catalog: Catalog, deployments: DeploymentStore,
  grpcAddress: () => string, logger: Logger, serverId: string, quotas: StoredQuotas, replicaLogs?: Pick<ReplicaLogs, 'append'>,
): Capacity {
  let replicas: ReplicaManager | undefined;
  // Hosts that disappear (reclaimed, removed) are replaced; an agent process that exits is
  // restarted by its provider, and only marked lost meanwhile, unless its engine never became
  // ready: that replica failed to start, and is replaced after the start back-off.
  const hostLost: HostLostListener = (replicaId, reason) => {
    void replicas?.hostLost(replicaId, reason).catch((error) => logger.error({ err: error, replicaId }, 'could not replace a lost replica'));
  };
  const agentExited = (replicaId: string, reason: string, restartInMs: number) => {
    void replicas?.agentExited(replicaId, reason, restartInMs).catch((error) => logger.error({ err: error }, 'could not record agent exit'));
  };
  // The local provider is one machine with one weights cache; every market host starts empty.
  const agentProcesses = (component: string, sharedModelCache: boolean, offer?: { gpuName: string; gpuMemoryGb: number; pricePerHour: number }) => new LocalProvider({
    modelDownloadMs: config.localModelDownloadMs, sharedModelCache,
    controlPlaneAddress: grpcAddress,
    agentEntry: config.agentEntry ?? DEFAULT_AGENT_ENTRY,
    engine: config.localEngine,
    engineUrl: config.localEngineUrl,
    engineEnv: localEngineEnv(config, catalog),
    maxConcurrency: (deployment: Deployment) => {
      const model = catalog.find(deployment.modelId);
      if (!model || model.modality === 'text') return config.localMaxConcurrency;
      return config.localMediaMaxConcurrency ?? model.targetConcurrency;
    },
    restartDelayMs: config.localRestartDelayMs,
    // Local agents trace as the server does (same exporter and sampler), under their own service name.
    extraEnv: { ...config.tracing?.agentEnv, ...config.localAgentEnv },
    nodeArgs: config.localAgentNodeArgs,
    onAgentExit: agentExited,
    onAgentLine: replicaLogs ? (owner, text) => replicaLogs.append(owner, text) : undefined,
    offer,
  }, logger.child({ component }));

  const providers = new Map<string, CapacityProvider>();
  const localProvider = config.localAgents
    ? agentProcesses('local-provider', true, { gpuName: config.localGpuName, gpuMemoryGb: config.localGpuMemoryGb, pricePerHour: config.localPricePerHour })
    : null;
  if (localProvider) providers.set('local', localProvider);
  const market = config.localAgents
    ? new MarketProvider(agentProcesses('market-hosts', false), {
      seed: config.marketSeed, priceDriftIntervalMs: config.marketPriceDriftIntervalMs, volatility: config.marketVolatility,
    }, hostLost, logger.child({ component: 'market' }))
    : null;
  if (market) providers.set('market', market);
  const staticHosts = new StaticProvider(dataSource, hostLost);
  providers.set('static', staticHosts);
  const kubernetes = config.kubernetesConfigFile ? kubernetesProvider(config.kubernetesConfigFile, config.agentBinaryDir ?? DEFAULT_AGENT_BINARY_DIR, catalog, () => replicas, logger) : null;
  if (kubernetes) providers.set('kubernetes', kubernetes);

  const metering = new Metering(dataSource, { intervalMs: config.meteringIntervalMs }, logger.child({ component: 'metering' }));
  replicas = new ReplicaManager(dataSource, deployments, providers, catalog, metering, staticHosts, logger.child({ component: 'replicas' }), serverId,
    new ReplicaQuota(quotas, serverId));
  return {
    providers, localProvider, market, staticHosts, kubernetes, metering, replicas,
    async stopAgents() {
      // Pods are not ours to stop with the server: only the watch ends (their agents rejoin the next one).
      await Promise.all([localProvider?.stopAll(), market?.stopAll(), kubernetes?.stopAll()]);
    },
    killAgents() {
      localProvider?.killAll();
      market?.killAll();
    },
  };
}

/** The Kubernetes provider, its pods' states going to the replicas. */
function kubernetesProvider(file: string, agentBinaryDir: string, catalog: Catalog, replicas: () => ReplicaManager | undefined, logger: Logger): KubernetesProvider {
  // Required only here, when a cluster is configured: loading the official client costs a server
  // ~0.7 s at start-up and ~27 MiB of heap (~67 MiB of RSS), which no server without one should pay.
  const { loadKubernetesConfig } = require('../providers/kubernetes/kubernetes-config') as typeof import('../providers/kubernetes/kubernetes-config');
  const { KubernetesProvider: Provider, loadKubeConfig } = require('../providers/kubernetes/kubernetes-provider') as typeof import('../providers/kubernetes/kubernetes-provider');
  const config = loadKubernetesConfig(file);
  const log = logger.child({ component: 'kubernetes' });
  // One replica's reports are written in the order the watch saw them (a late write of an
  // earlier state would otherwise overwrite a later one).
  const chains = new Map<string, Promise<void>>();
  const report = (replicaId: string, what: string, work: (manager: ReplicaManager) => Promise<void>) => {
    const manager = replicas();
    if (!manager) return;
    const next = (chains.get(replicaId) ?? Promise.resolve()).then(() => work(manager)).catch((error) => log.error({ err: error, replicaId }, `could not record ${what}`));
    chains.set(replicaId, next);
    void next.then(() => { if (chains.get(replicaId) === next) chains.delete(replicaId); });
  };
  return new Provider({
    config, kubeConfig: loadKubeConfig(config.kubeconfig), catalog, agentBinaryDir, version: platformVersion(__dirname),
    events: {
      waiting: (replicaId, reason) => report(replicaId, 'a pod waiting', (manager) => manager.providerWaiting(replicaId, reason)),
      failed: (replicaId, reason) => report(replicaId, 'a pod failure', (manager) => manager.providerFailed(replicaId, reason)),
      gone: (replicaId, reason) => report(replicaId, 'a pod gone', (manager) => manager.hostLost(replicaId, reason)),
    },
  }, log);
}
