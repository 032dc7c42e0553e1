import type { DataSource } from 'typeorm';
import type { Logger } from 'pino';
import { ApiKeyService } from './api-keys/api-key.service';
import { BillingQueries } from './billing/billing-queries';
import { GuestCredit } from './billing/guest-credit';
import { SharedBilling } from './billing/shared-billing';
import { Catalog } from './catalog/catalog';
import { CatalogAdmin } from './catalog/catalog-admin';
import { localGgufModel } from './catalog/local-gguf-model';
import type { ControlPlaneConfig } from './full-config';
import { DeploymentService } from './deployments/deployment.service';
import { DeploymentStore } from './deployments/deployment-store';
import { AgentReach } from './dispatch/agent-reach';
import { isLoopbackBind } from './network/bind-address';
import { AgentServer } from './dispatch/agent-server';
import { AdapterDirectory } from './adapters/adapter-directory';
import { SharedAdapterIndex } from './adapters/shared-adapter-index';
import { AttachedAdapterNeeds } from './deployments/attached-adapter-needs';
import { FileUploads } from './batches/file-uploads';
import { AdapterService } from './adapters/adapter.service';
import { AdapterStore } from './adapters/adapter-store';
import { AdapterWeights } from './adapters/adapter-weights';
import { AdapterResidency } from './adapters/adapter-residency';
import { AdapterUsage } from './adapters/adapter-usage';
import { Dispatcher } from './dispatch/dispatcher';
import { ClusterNotifier } from './events/cluster-notifier';
import { ControlPlaneEvents } from './events/control-plane-events';
import { Autoscaler } from './autoscaling/autoscaler';
import { ClusterScalingSignals } from './autoscaling/cluster-scaling-signals';
import { ScalingPolicies } from './autoscaling/scaling-policies';
import { SloAutoscaler } from './autoscaling/slo-autoscaler';
import { ServerScalingSignals } from './autoscaling/server-scaling-signals';
import { CapacityLoop } from './capacity/capacity-loop';
import { startCapacity, type Capacity } from './capacity/start-capacity';
import { Lifecycle } from './lifecycle';
import type { LocalProvider } from './providers/local-provider';
import { PublicUrl } from './public-url';
import { MediaJobs } from './requests/media-jobs';
import { OutputDestinations } from './requests/output-destinations';
import { OutputRetention } from './requests/output-retention';
import { ResponseStore } from './responses/response-store';
import { ResponsesService } from './responses/responses-service';
import { BackgroundQueue } from './responses/background-queue';
import { BackgroundResponses } from './responses/background-responses';
import { RequestRecords } from './requests/request-records';
import { RequestScheduler } from './requests/request-scheduler';
import { RequestService } from './requests/request-service';
import { SecretBox } from './secret-box';
import { startWebhooks, type Webhooks } from './webhooks/start-webhooks';
import { createManagedObjectStore } from './storage/managed-object-store';
import type { ObjectStore } from './storage/object-store';
import { StorageCredentialService } from './storage/storage-credential.service';
import { resolveServerKey } from './server-keys';
import { createRateLimiter } from './rate-limits/create-rate-limiter';
import type { RateLimiter } from './rate-limits/rate-limit-decision';
import type { ReplicaManager } from './replicas/replica-manager';
import { UsageRecorder } from './usage/usage-recorder';
import { SignInLinks } from './console/sign-in-links';
import { SignInThrottle } from './rate-limits/sign-in-throttle';
import { WorkspaceAdmin } from './workspaces/workspace-admin';
import { WorkspaceService } from './workspaces/workspace.service';
import { controlPlaneGauges } from './telemetry/control-plane-gauges';
import { SharedPool } from './sharing/shared-pool';
import { SharedServing } from './sharing/shared-serving';
import { SharingRollout } from './sharing/sharing-rollout';
import { clusterLoad, clusterWaiting } from './cluster/cluster-load';
import { ColdStartQueue } from './dispatch/cold-start-queue';
import { bridgeEvents } from './cluster/event-bridge';
import { ReplicaLogs } from './replicas/replica-logs';
import { JobRouter } from './cluster/job-router';
import { RelayClient } from './cluster/relay-client';
import { RelayServer } from './cluster/relay-server';
import { relayedReplicaWait } from './cluster/relayed-replica-wait';
import { relayToken, ServerRegistry } from './cluster/server-registry';
import { loadRelayService } from '../proto/cluster/v1';
import { newSecret } from './secrets';
import { Metrics } from './telemetry/metrics';
import { StartupMetrics } from './telemetry/startup-metrics';
import { ReplicaStartWatchdog } from './replicas/replica-start-watchdog';
import { startOtelMetrics } from './telemetry/otel-metrics';
import { RequestObservers } from './pipeline/finished-request';
import { InferencePipeline } from './pipeline/inference-pipeline';
import { OpenAiBatchLines } from './openai/batch-lines';
import { servedEndpoints } from './openai/inference-endpoints';
import { CacheSalts } from './dispatch/cache-salts';
import { ApiKey } from './api-keys/api-key.entity';
import { BatchDeletion } from './batches/batch-deletion';
import { BatchFileChecks } from './batches/batch-file-checks';
import { BatchFilePurge } from './batches/batch-file-purge';
import { BatchFiles } from './batches/batch-files';
import { BatchInputReader } from './batches/batch-input-reader';
import { BatchFinalizer } from './batches/batch-finalizer';
import { BatchRunner } from './batches/batch-runner';
import { BatchService } from './batches/batch-service';
import { BatchStore } from './batches/batch-store';
import { BatchValidator } from './batches/batch-validator';
import { BatchQuota } from './batches/batch-quota';
import { StoredQuotas } from './budgets/stored-quota';
import { DeploymentBudget } from './deployments/deployment-budget';
import { ReplicaQuota } from './replicas/replica-quota';
import { TenantBudget } from './budgets/tenant-budget';
import { WorkspaceBudgets } from './budgets/workspace-budgets';
import { BUDGET_NAMES, BUDGETS, type BudgetName, type BudgetScope } from './budgets/budget-kinds';
import { tenantQueriesOf } from './data-source';
import { RetentionSweep } from './database/retention-sweep';
import { DeploymentMetrics } from './metrics-history/deployment-metrics';
import { AutoscalingHistoryStore } from './metrics-history/autoscaling-history';
import { MetricsHistoryStore } from './metrics-history/metrics-history-store';
import { MinuteRollups } from './metrics-history/minute-rollups';
import { RollupWriter } from './metrics-history/rollup-writer';
import { RequestLog } from './request-log/request-log';
import { RequestLogRecorder } from './request-log/request-log-recorder';
import { RequestLogStore } from './request-log/request-log-store';
import type { TenantQueries } from './database/tenant-queries';
import type { Tracing } from '../common/tracing/tracing';

/** Everything the gateway calls; built in one place from one config object. */
export interface ControlPlane {
  readonly config: ControlPlaneConfig;
  readonly dataSource: DataSource;
  readonly catalog: Catalog;
  /** Operator changes to the catalog (registered and disabled models). */
  readonly catalogAdmin: CatalogAdmin;
  readonly events: ControlPlaneEvents;
  readonly notifier: ClusterNotifier;
  readonly workspaces: WorkspaceService;
  /** Operator: open (with first key and credit), list and delete workspaces. */
  readonly workspaceAdmin: WorkspaceAdmin;
  readonly signInLinks: SignInLinks;
  readonly apiKeys: ApiKeyService;
  readonly deploymentStore: DeploymentStore;
  readonly deployments: DeploymentService;
  readonly replicas: ReplicaManager;
  /** Each replica's recent agent and engine lines (scrubbed, bounded), from this server's agents and its peers'. */
  readonly replicaLogs: ReplicaLogs;
  readonly dispatcher: Dispatcher;
  /** Text jobs to a ready replica of their deployment on any server: here, or relayed to the peer holding it. */
  readonly jobs: JobRouter;
  /** This server's row among the servers on the database, and its live peers. */
  readonly registry: ServerRegistry;
  readonly agentServer: AgentServer;
  readonly usage: UsageRecorder;
  readonly rateLimiter: RateLimiter;
  /** Prometheus metrics (`GET /metrics`): the gateway records requests into it, the autoscaler decisions, metering spend. */
  readonly metrics: Metrics;
  readonly localProvider: LocalProvider | null;
  /** Providers, placement, the market, static hosts and metering. */
  readonly capacity: Capacity;
  /** Costs, usage, ledger, earnings and credit of workspaces. */
  readonly billing: BillingQueries;
  /** The ledger side of guest billing: leases of a guest's credit, settlements in batches (debit guest, credit owner); guestCredit uses it. */
  readonly sharedBilling: SharedBilling;
  /** Guest credit in memory against per-server leases, settlements written in batches (what shared serving uses). */
  readonly guestCredit: GuestCredit;
  /** The guest side of shared serving: shared models, admission into idle slots, settlement. */
  readonly shared: SharedServing;
  /**
   * The path every inference request takes: resolve the target, admission, placement and
   * dispatch, settlement. The `/v1` and `/shared/v1` routes call only this for their work.
   */
  readonly pipeline: InferencePipeline;
  /** The Responses API: turns through the pipeline, state in the `responses` table. */
  readonly responses: ResponsesService;
  /** `background: true` responses: queued in the responses table, run by any server, cancellable. */
  readonly backgroundResponses: BackgroundResponses;
  readonly responseRetention: RetentionSweep;
  /** Autoscaling, replacement of lost replicas and placement retries, every few seconds. */
  readonly capacityLoop: CapacityLoop;
  /** Requests waiting at this server for a first replica of their deployment (scale to zero, a replica starting). */
  readonly coldStarts: ColdStartQueue;
  /** Requests waiting for a first replica of the deployment, at every server (the console's "starting: N requests waiting"). */
  waitingForReplica(deploymentId: string): number;
  /** Set by the gateway once it listens; signed file links are built on it. */
  readonly publicUrl: PublicUrl;
  /** Managed output storage (local files by default, or the platform's S3 bucket). */
  readonly managedStore: ObjectStore;
  readonly storageCredentials: StorageCredentialService;
  readonly requestRecords: RequestRecords;
  readonly requests: RequestService;
  readonly retention: OutputRetention;
  readonly webhooks: Webhooks;
  /**
   * The OpenAI Batch API: files and batches of deployment endpoints (`/files`, `/batches`), and
   * GraphQL's view of them. The files are `batches.files`; `batchUpdated` on `events` tells of
   * every status change and, throttled, of the request counts moving.
   */
  readonly batches: BatchService;
  /** Signed one-time upload links into the Files API (the console's upload of adapter weights). */
  readonly fileUploads: FileUploads;
  /** Runs batch lines in the capacity live traffic leaves free on this server's replicas (docs/batches.md). */
  readonly batchRunner: BatchRunner;
  /**
   * The tenant budget: what a request, socket or operation holds while it lasts (`budget`: per
   * key, workspace, address, socket and this server) and what a workspace keeps stored
   * (`quotas`), with each workspace's limits (`workspaceBudgets`: defaults and the operator's
   * settings). Every surface asks it before it holds a resource (docs/tenant-budget.md).
   */
  readonly budget: TenantBudget;
  readonly quotas: StoredQuotas;
  readonly workspaceBudgets: WorkspaceBudgets;
  /**
   * Runs a tenant's request so that the queries it causes take the tenant pool, with its
   * statement timeout (database/tenant-queries.ts): GraphQL operations, subscription events,
   * REST lists.
   */
  readonly tenantQueries: TenantQueries;
  /** Validates new batches' input files here; `slices` tells how it shared the event loop (tests, measurements). */
  readonly batchValidator: Pick<BatchValidator, 'slices'>;
  /** `host:port` agents on this machine dial. */
  readonly grpcAddress: string;
  /** Where agents reach the gRPC port, and the warning when what needs agents on other machines cannot. */
  readonly agentReach: AgentReach;
  /** Per-minute deployment history (GraphQL `deploymentMetrics`); `minuteRollups` counts this server's minutes, `rollupWriter` writes them (tests flush it). */
  readonly metricsHistory: DeploymentMetrics;
  readonly minuteRollups: MinuteRollups;
  readonly rollupWriter: RollupWriter;
  /** The request log of text calls (GraphQL `requestLog`) and its batched writer (tests flush it). */
  readonly requestLog: RequestLog;
  readonly requestLogRecorder: RequestLogRecorder;
  /**
   * This server's tracing (OTEL_*, docs/tracing.md), given by whoever started the control plane
   * (its logger names the active span); null when off. The gateway's spans are made with it too.
   */
  readonly tracing: Tracing | null;
  /** LoRA adapters of workspaces (docs/adapters.md): registration, revisions, attachments, sharing. */
  readonly adapters: AdapterService;
  /** The request path's view of adapters: which one a `model` names, and the AdapterRef its job carries. */
  readonly adapterDirectory: AdapterDirectory;
  /** Where each adapter is loaded, from this server's agents' heartbeats. */
  readonly adapterResidency: AdapterResidency;
  readonly adapterUsage: AdapterUsage;
  /** Lets local agents finish their in-flight jobs and exit (they may still upload outputs through the gateway). */
  drainAgents(): Promise<void>;
  stop(): Promise<void>;
}

/**
 * Builds the control plane on an open, migrated database and starts its gRPC server and replicas.
 * It runs no gateway code: what a request means (parsing, errors, the endpoints a model serves,
 * batch lines) is its own OpenAI request model (openai/). `routeLabels` is data, the values the
 * metrics' `route` label may take (the gateway's closed set of route labels).
 */
export async function startControlPlane(
  config: ControlPlaneConfig, dataSource: DataSource, logger: Logger, routeLabels: readonly string[], tracing: Tracing | null = null,
): Promise<ControlPlane> {
  const lifecycle = new Lifecycle(logger);
  try {
    return await compose(config, dataSource, logger, lifecycle, routeLabels, tracing);
  } catch (error) {
    await lifecycle.stopAll();
    throw error;
  }
}

async function compose(
  config: ControlPlaneConfig, dataSource: DataSource, logger: Logger, lifecycle: Lifecycle, routeLabels: readonly string[], tracing: Tracing | null,
): Promise<ControlPlane> {
  const catalog = Catalog.load().withLocalModel(config.localModelPath ? localGgufModel(config.localModelPath, { parallel: config.localLlamaParallel ?? 2 }) : undefined);
  const catalogAdmin = new CatalogAdmin(dataSource, catalog);
  await catalogAdmin.load();
  const events = new ControlPlaneEvents();
  const notifier = await ClusterNotifier.start(databaseUrlOf(dataSource), dataSource, logger.child({ component: 'cluster' }));
  lifecycle.add('cluster notifier', () => notifier.stop());
  const workspaceBudgets = new WorkspaceBudgets(dataSource, config.budgets, notifier);
  await workspaceBudgets.start();
  const refused = (name: BudgetName, scope: BudgetScope) => metrics.recordBudgetRefusal(name, scope);
  const budget = new TenantBudget(workspaceBudgets, refused);
  const quotas = new StoredQuotas(workspaceBudgets, refused);
  const workspaces = new WorkspaceService(dataSource);
  const apiKeys = new ApiKeyService(dataSource, {
    cacheTtlMs: config.apiKeyCacheTtlMs, defaultRpmLimit: config.defaultRpmLimit, defaultTpdLimit: config.defaultTpdLimit,
  }, notifier);
  const deploymentStore = new DeploymentStore(dataSource, events, notifier);
  const dispatcher = new Dispatcher();
  const metrics = new Metrics({
    routes: routeLabels, ...controlPlaneGauges(dataSource, dispatcher), logger: logger.child({ component: 'metrics' }),
    budgetHeld: () => HELD_BUDGETS.map((name) => ({ budget: name, held: budget.used(name, 'server') })),
    coldStartWaiting: () => coldStarts.waitingRows(),
  });
  lifecycle.add('metrics', () => metrics.close());
  let grpcAddress = '';
  // The recent lines of the agents this server spawns, and those other servers' agents printed (the event bridge).
  const replicaLogs = new ReplicaLogs(events);
  const capacity = startCapacity(config, dataSource, catalog, deploymentStore, () => grpcAddress, logger, notifier.instanceId, quotas, replicaLogs);
  const { replicas, localProvider } = capacity;
  // Cold starts: each phase's time on /metrics; replicas that never become ready are replaced with back-off.
  replicas.setStartupListener(new StartupMetrics(metrics.registry));
  const startWatchdog = new ReplicaStartWatchdog(dataSource, replicas, {
    deadlineMs: config.replicaStartDeadlineMs, backoffBaseMs: config.replicaStartBackoffBaseMs, backoffMaxMs: config.replicaStartBackoffMaxMs,
  });
  replicas.setStartHold((deploymentId) => startWatchdog.holdReason(deploymentId));
  capacity.metering.onCharges((charges) => {
    for (const charge of charges) if (charge.amount > 0) metrics.recordSpend(charge.deploymentId, charge.amount);
  });
  capacity.metering.start();
  lifecycle.add('metering', () => capacity.metering.stop());
  // This server's owner traffic per deployment (arrivals, the last minute's TTFT or queue wait), published in its registry
  // row for the autoscaler's server; it also knows each deployment's SLO, against which the minute rollups judge requests.
  const scalingSignals = new ServerScalingSignals(deploymentStore);
  events.on('deploymentUpdated', (deployment) => scalingSignals.learn(deployment));
  // Minute rollups count what this server's metering passes bill; written with the requests' counts.
  const minuteRollups = new MinuteRollups((deploymentId) => scalingSignals.sloOf(deploymentId));
  capacity.metering.onCharges((charges) => minuteRollups.charged(charges));
  const rollupWriter = new RollupWriter(dataSource, minuteRollups, config.metricsHistory.flushIntervalMs, logger.child({ component: 'metrics-history' }));
  rollupWriter.start();
  lifecycle.add('metrics history', () => rollupWriter.stop());
  const metricsHistoryStore = new MetricsHistoryStore(dataSource);
  const metricsRetention = new RetentionSweep('metrics history',
    RetentionSweep.olderThan(config.metricsHistory.retentionDays, (before, limit) => metricsHistoryStore.deleteBefore(before, limit)),
    config.metricsHistory.sweepIntervalMs, logger.child({ component: 'metrics-history' }));
  metricsRetention.start();
  lifecycle.add('metrics history retention', () => metricsRetention.stop());
  const requestLogStore = new RequestLogStore(dataSource);
  const requestLogRecorder = new RequestLogRecorder(dataSource, config.requestLog.flushIntervalMs, logger.child({ component: 'request-log' }));
  lifecycle.add('request log', () => requestLogRecorder.stop());
  const requestLogRetention = new RetentionSweep('request log',
    RetentionSweep.olderThan(config.requestLog.retentionDays, (before, limit) => requestLogStore.deleteBefore(before, limit)),
    config.requestLog.sweepIntervalMs, logger.child({ component: 'request-log' }));
  requestLogRetention.start();
  lifecycle.add('request log retention', () => requestLogRetention.stop());

  const publicUrl = new PublicUrl();
  const storage = config.storage;
  const secretsKey = resolveServerKey(config.secretsEncryptionKey, 'SECRETS_ENCRYPTION_KEY', config.dataDir, 'secrets-encryption.key');
  const storageSigningKey = resolveServerKey(storage.storageSigningKey, 'STORAGE_SIGNING_KEY', config.dataDir, 'storage-signing.key');
  const managedStore = createManagedObjectStore(storage, { dataDir: config.dataDir, publicUrl: () => publicUrl.get(), signingKey: storageSigningKey });
  const storageCredentials = new StorageCredentialService(dataSource, {
    encryptionKey: secretsKey, allowPrivateEndpoints: storage.allowPrivateEndpoints,
  });
  const webhooks = startWebhooks(config.webhooks, dataSource, notifier, events, new SecretBox(secretsKey), logger.child({ component: 'webhooks' }), tracing);
  lifecycle.add('webhook delivery', () => webhooks.loop.stop());
  const destinations = new OutputDestinations(managedStore, storageCredentials, {
    managedLinkTtlSeconds: storage.outputUrlTtlSeconds, customerLinkTtlSeconds: storage.customerOutputUrlTtlSeconds,
  });
  const batchStore = new BatchStore(dataSource, events, notifier);
  batchStore.onTerminal(webhooks.outbox.onBatchTerminal);
  const batchFiles = new BatchFiles(dataSource, managedStore, storageCredentials, { maxBytes: config.batches.filesMaxBytes });
  const batchFilePurge = new BatchFilePurge(dataSource, batchFiles, logger.child({ component: 'batch-files' }));
  const batchDeletion = new BatchDeletion(dataSource, batchStore, batchFiles, batchFilePurge);
  const batchQuota = new BatchQuota(dataSource, quotas);
  const batches = new BatchService(batchStore, batchFiles, catalog, batchFilePurge, { completionWindowMs: config.batches.completionWindowMs }, batchQuota);
  const deployments = new DeploymentService(deploymentStore, replicas, catalog, destinations, batchDeletion, new DeploymentBudget(
    quotas, new ReplicaQuota(quotas, notifier.instanceId), config.localPricePerHour === 0 ? ['external', 'local'] : ['external'],
  ), new AttachedAdapterNeeds(dataSource));
  const adapterStore = new AdapterStore(dataSource, events, notifier, config.adapters.cacheTtlMs);
  const adapters = new AdapterService(adapterStore, new AdapterWeights(batchFiles, storageCredentials, deployments, managedStore, config.adapters), catalog, deployments, config.adapters);
  const adapterDirectory = new AdapterDirectory(adapterStore, managedStore, config.adapters);
  const fileUploads = new FileUploads(dataSource, batchFiles, deployments, catalog, batchQuota, {
    maxBytes: Math.min(config.batches.filesMaxBytes, config.adapters.maxBytes), linkTtlSeconds: config.adapters.uploadLinkTtlSeconds,
    signingKey: storageSigningKey, publicUrl: () => publicUrl.get(),
  });
  // Peers' replicas from their registry rows (the registry starts below; read only when asked).
  const adapterResidency = new AdapterResidency(dispatcher, notifier.instanceId, () => registry?.peers() ?? []);
  const adapterUsage = new AdapterUsage(dataSource);
  const usage = new UsageRecorder(dataSource, config.usageFlushIntervalMs, logger.child({ component: 'usage' }));
  lifecycle.add('usage recorder', () => usage.stop());
  // Guest credit in memory (leases) and settlements in batches; stops after the agent server, so
  // the guest jobs it ends are settled, and writes them before the database goes.
  const sharedBilling = new SharedBilling(dataSource, () => apiKeys.clearCache());
  const guestCredit = new GuestCredit(sharedBilling, notifier.instanceId, notifier, logger.child({ component: 'guest-credit' }), {
    settleIntervalMs: config.sharing.settleIntervalMs, leaseTtlMs: config.sharing.reservationTtlMs,
    leaseIdleMs: config.sharing.creditLeaseIdleMs, leaseRequests: config.sharing.creditLeaseRequests,
  });
  // A top-up (or a zero crossing, or a lost notification connection) drops every cached credit state: guests' too.
  apiKeys.onInvalidated((hash) => {
    if (hash === '*') guestCredit.forgetAvailable();
  });
  guestCredit.start();
  lifecycle.add('guest credit', () => guestCredit.stop());
  const rateLimiter = await createRateLimiter(config, (apiKeyId, since) => usage.tokensSince(apiKeyId, since), logger.child({ component: 'rate-limits' }));
  lifecycle.add('rate limiter', () => rateLimiter.close?.());
  const requestConfig = config.requests;
  const requestRecords = new RequestRecords(dataSource);
  bridgeEvents(events, notifier, requestRecords, logger.child({ component: 'cluster' }), replicaLogs);
  requestRecords.onTerminal(webhooks.outbox.onRequestTerminal);
  const mediaJobs = new MediaJobs(requestRecords, dispatcher, destinations, events, {
    imageTimeoutMs: requestConfig.imageTimeoutMs, videoTimeoutMs: requestConfig.videoTimeoutMs,
    managedRetentionMs: requestConfig.managedRetentionDays * 86_400_000,
    // A sync call's managed link is its only way to the file: keep it as long as the link lives, plus a margin.
    syncManagedRetentionMs: (storage.outputUrlTtlSeconds + 600) * 1000,
    progressWriteIntervalMs: 1_000,
  }, logger.child({ component: 'media-jobs' }), Date.now, tracing);
  // Stops after the agent server: jobs whose streams it ends still write their outcome.
  lifecycle.add('media jobs', () => mediaJobs.settle());
  // A media job's wait in the durable queue is its SLO's measure (queue wait), taken where it starts.
  mediaJobs.onStarted((record) => {
    const waitMs = Math.max(0, (record.startedAt?.getTime() ?? Date.now()) - record.queuedAt.getTime());
    scalingSignals.mediaStarted(record.deploymentId, waitMs);
    minuteRollups.mediaStarted(record.deploymentId, waitMs);
  });
  // Built once the job path exists (below); stops after the agent server too, so lines ending with it write their answers.
  let batchRunner: BatchRunner | null = null;
  lifecycle.add('batch runner', () => batchRunner?.settle());
  const agentServer = new AgentServer({
    host: config.grpcHost, port: config.grpcPort,
    helloTimeoutMs: config.helloTimeoutMs, heartbeatIntervalMs: config.heartbeatIntervalMs,
  }, dispatcher, replicas, logger.child({ component: 'agent-server' }), events);
  let registry: ServerRegistry | null = null;
  const sharedPool = new SharedPool(catalog, deploymentStore, dispatcher, events, config.sharing, logger.child({ component: 'shared-pool' }), () => registry?.peers() ?? []);
  // A relayed job finding no replica here waits in this server's cold-start queue (made below, before any peer can relay).
  const relayServer = new RelayServer(dispatcher, logger.child({ component: 'relay' }), (deploymentId, needsAdapterSlots) => sharedPool.placeHere(deploymentId, needsAdapterSlots), tracing,
    relayedReplicaWait(deploymentStore, () => coldStarts));
  const relayService = loadRelayService().service;
  agentServer.addService(relayService, relayServer.handlers);
  const port = await agentServer.start();
  lifecycle.add('agent server', () => agentServer.stop());
  lifecycle.add('relay streams', () => relayServer.close());
  const agentReach = new AgentReach(config.grpcHost, port, logger.child({ component: 'agent-server' }));
  grpcAddress = agentReach.localAddress;
  // The agent of a replica ending may hold its stream on another server: that one drains it.
  const drainHere = (replicaId: string, reason: string) => agentServer.connectionOf(replicaId)?.drain(reason);
  notifier.on('replica-drain', (payload) => {
    const [replicaId, ...reason] = payload.split('|');
    drainHere(replicaId, reason.join('|'));
  });
  replicas.setDrainer((replicaId, reason) => {
    if (agentServer.connectionOf(replicaId)) drainHere(replicaId, reason);
    else notifier.publish('replica-drain', `${replicaId}|${reason}`);
  });
  const token = await relayToken(dataSource, newSecret('rt-'));
  const cacheSalts = await CacheSalts.load(dataSource);
  relayServer.setToken(token);
  // Owner requests that find no replica anywhere wait here while one starts; what waits, and when
  // each deployment's last request came, go out with this server's load (the registry).
  const coldStarts: ColdStartQueue = new ColdStartQueue({
    hasReplica: (deploymentId): boolean => jobs.hasReplica(deploymentId),
    coldStart: (deploymentId) => {
      capacityLoop.coldStart(deploymentId);
      notifier.publish('cold-start', deploymentId);
    },
    refused: (deploymentId, reason) => metrics.recordColdStartRefusal(deploymentId, reason),
  }, { maxWaitMs: config.coldStartMaxWaitMs, startupEstimateMs: config.coldStartEstimateMs });
  dispatcher.onCapacity((deploymentId) => coldStarts.capacity(deploymentId));
  const servers = new ServerRegistry(dataSource, notifier.instanceId, config.clusterAddress ?? grpcAddress, dispatcher, {
    heartbeatIntervalMs: config.clusterHeartbeatIntervalMs, serverTimeoutMs: config.clusterServerTimeoutMs,
  }, logger.child({ component: 'cluster' }), (connection) => sharedPool.guestSlots(connection), () => scalingSignals.snapshot(), coldStarts);
  servers.onPeers(() => coldStarts.peersChanged());
  registry = servers;
  await servers.start();
  lifecycle.add('server registry', () => servers.stop());
  const relayClient = new RelayClient(() => token, notifier.instanceId);
  lifecycle.add('relay client', () => relayClient.close());
  const jobs = new JobRouter(dispatcher, servers, relayClient, (deploymentId, policy, reason) => metrics.recordRouting(deploymentId, policy, reason), {
    loadFactor: config.routingLoadFactor, homeReplicas: config.routingHomeReplicas,
  }, 2 * config.clusterHeartbeatIntervalMs);
  // A relayed job a peer sends back unstarted (its replicas left since this server's view of them) runs elsewhere.
  relayClient.onDraining((job, fromPeerId) => jobs.replace(job, fromPeerId));

  const scheduler = new RequestScheduler(requestRecords, dispatcher, mediaJobs, notifier, events, {
    leaseMs: requestConfig.leaseMs, sweepIntervalMs: requestConfig.sweepIntervalMs, queueTtlMs: requestConfig.queueTtlMs,
  }, logger.child({ component: 'request-scheduler' }));
  const requests = new RequestService(requestRecords, scheduler, mediaJobs, destinations, dispatcher, events, {
    idempotencyTtlMs: requestConfig.idempotencyTtlHours * 3_600_000, maxQueuedPerDeployment: requestConfig.maxQueuedPerDeployment,
    webhookUrls: webhooks.urlPolicy,
  }, logger.child({ component: 'requests' }), Date.now, coldStarts);
  const retention = new OutputRetention(dataSource, destinations, { intervalMs: requestConfig.retentionIntervalMs }, logger.child({ component: 'retention' }));
  scheduler.start();
  lifecycle.add('request scheduler', () => scheduler.stop());
  retention.start();
  lifecycle.add('output retention', () => retention.stop());

  // Local agents are our children: SIGTERM drains them. Remote agents are not told to
  // drain; their streams just end and they reconnect to the next control plane.
  const capacityLoop = new CapacityLoop({
    dataSource, deployments: deploymentStore, deploymentService: deployments, replicas, dispatcher, requestRecords,
    providers: capacity.providers, catalog,
    // The `slo` policy (autoscaling/slo-autoscaler.ts) is registered here beside `concurrency`; until then a deployment set
    // to it runs `concurrency`, and the loop logs that once.
    policies: new ScalingPolicies({
      concurrency: new Autoscaler({
        windowMs: config.autoscaleWindowMs, scaleUpStabilizationMs: config.autoscaleScaleUpStabilizationMs,
        scaleDownStabilizationMs: config.autoscaleScaleDownStabilizationMs,
      }),
      slo: new SloAutoscaler(),
    }),
    // Every server's published traffic (this one's now, the peers' as of their last heartbeat).
    signals: new ClusterScalingSignals(() => [
      { serverId: servers.serverId, load: servers.loadSnapshot() },
      ...servers.peers().map((peer) => ({ serverId: peer.id, load: peer.load })),
    ], { rateWindowMs: config.autoscaleWindowMs }),
    onDecision: (decision) => metrics.recordScalingDecision(decision.deploymentId, decision.action, decision.policy ?? 'concurrency'),
    sharingRollout: new SharingRollout(deploymentStore, replicas, logger.child({ component: 'sharing-rollout' })),
    liveServers: () => servers.liveServerIds(),
    loadOf: (deploymentId) => clusterLoad(servers, deploymentId),
    openBatch: async (deploymentId) => (await batchStore.openBatches(deploymentId)).length > 0,
    logger: logger.child({ component: 'capacity-loop' }),
    startWatchdog,
  }, { intervalMs: config.capacityIntervalMs, replicaLostGraceMs: config.replicaLostGraceMs });
  capacity.market?.onChange(() => capacityLoop.wake());
  // Requests wait at another server for a first replica: if this server runs the loop, it decides now.
  notifier.on('cold-start', (deploymentId) => capacityLoop.coldStart(deploymentId));
  capacityLoop.start();
  lifecycle.add('capacity loop', () => capacityLoop.stop());
  lifecycle.add('local agents', () => capacity.stopAgents());
  await sharedPool.start();
  lifecycle.add('shared pool', () => sharedPool.stop());
  // Owners' adapters offered to guests as `shared/<adapter id>` (docs/adapters.md#sharing), held in memory for the guest path.
  const sharedAdapters = new SharedAdapterIndex(adapterStore, events, managedStore,
    { minLinkTtlSeconds: config.adapters.minLinkTtlSeconds, refreshMs: config.adapters.cacheTtlMs }, logger.child({ component: 'shared-adapters' }));
  await sharedAdapters.start();
  lifecycle.add('shared adapters', () => sharedAdapters.stop());
  const shared = new SharedServing(sharedPool, dispatcher, guestCredit, config.sharing, logger.child({ component: 'shared-serving' }), relayClient,
    undefined, sharedAdapters);
  if (capacity.kubernetes) {
    // The watch first: reconcile then reads the pods as they are, and their states flow from then on.
    await capacity.kubernetes.start();
  }
  await replicas.reconcile(await servers.liveServerIds());
  agentReach.announce(await remoteAgentNeeds(deploymentStore, capacity, config.clusterAddress));
  // Every settled request is heard here: per-deployment metrics, minute rollups, the request log.
  const requestObservers = new RequestObservers((error) => logger.error({ err: error }, 'a finished-request observer failed'));
  requestObservers.add(metrics);
  // Off by default: then no exporter, timer or observer exists, and a request pays nothing for it.
  if (config.otelMetrics) {
    const otelMetrics = startOtelMetrics(config.otelMetrics, notifier.instanceId, logger.child({ component: 'otel-metrics' }));
    requestObservers.add(otelMetrics.observer);
    lifecycle.add('OpenTelemetry metrics', () => otelMetrics.shutdown());
  }
  requestObservers.add(minuteRollups);
  requestObservers.add(requestLogRecorder);
  requestObservers.add(scalingSignals);
  const pipeline = new InferencePipeline({
    catalog, deployments: deploymentStore, rateLimiter, jobs, shared, requests, usage, metrics, cacheSalts, observer: requestObservers,
    contentMaxBytes: config.requestLog.bodyMaxBytes, tracing, adapters: adapterDirectory, coldStarts,
    arrivals: {
      arrived: (deployment) => {
        scalingSignals.arrived(deployment);
        minuteRollups.arrived(deployment.id);
      },
    },
  });
  const responseStore = new ResponseStore(dataSource);
  const responses = new ResponsesService(pipeline, responseStore, { retentionDays: config.responses.retentionDays });
  // Stored responses carry their expiry (RESPONSES_RETENTION_DAYS from their creation); reads already hide expired ones.
  const responseRetention = new RetentionSweep('responses', (limit) => responseStore.deleteExpired(limit), config.responses.sweepIntervalMs,
    logger.child({ component: 'responses-retention' }));
  responseRetention.start();
  lifecycle.add('responses retention', () => responseRetention.stop());
  const backgroundQueue = new BackgroundQueue(dataSource);
  backgroundQueue.onTerminal(webhooks.outbox.onResponseTerminal);
  const backgroundResponses = new BackgroundResponses({
    queue: backgroundQueue, service: responses, keys: (id) => apiKeys.byId(id), deployments: (id) => deploymentStore.find(id), notifier,
    servedBy: servedEndpoints,
  }, {
    leaseMs: config.responses.backgroundLeaseMs, sweepIntervalMs: config.responses.backgroundSweepIntervalMs, timeoutMs: config.responses.backgroundTimeoutMs,
    maxAttempts: config.responses.backgroundAttempts, retryDelayMs: config.responses.backgroundRetryDelayMs,
  }, logger.child({ component: 'background-responses' }));
  backgroundResponses.start();
  lifecycle.add('background responses', () => backgroundResponses.stop());
  const apiKeyRows = dataSource.getRepository(ApiKey);
  const batchLines = new OpenAiBatchLines();
  const batchValidator = new BatchValidator(batchStore, batchFiles, new BatchFileChecks(dataSource), catalog, batchLines, config.batches, undefined, adapterDirectory);
  const runner = new BatchRunner({
    store: batchStore,
    validator: batchValidator,
    finalizer: new BatchFinalizer(batchStore, batchFiles, deploymentStore, batchFilePurge),
    purge: batchFilePurge, deletion: batchDeletion, uploads: fileUploads, inputs: new BatchInputReader(batchFiles),
    dispatcher, catalog, lines: batchLines, rateLimiter, tickets: pipeline, notifier, events, cacheSalts, tracing, adapters: adapterDirectory,
    keys: (apiKeyId) => apiKeyRows.findOne({ where: { id: apiKeyId }, select: { id: true, rpmLimit: true, tpdLimit: true } }),
  }, config.batches, logger.child({ component: 'batch-runner' }));
  batchRunner = runner;
  runner.start();

  return {
    config, dataSource, catalog, catalogAdmin, events, notifier, workspaces, apiKeys, deploymentStore, deployments, replicas, replicaLogs,
    dispatcher, jobs, registry: servers, agentServer, usage, rateLimiter, localProvider, capacity, capacityLoop, grpcAddress, agentReach,
    coldStarts, waitingForReplica: (deploymentId) => clusterWaiting(servers, coldStarts.waiting(deploymentId), deploymentId),
    billing: new BillingQueries(dataSource, () => apiKeys.clearCache()),
    sharedBilling, guestCredit, shared, pipeline, responses, responseRetention, backgroundResponses,
    workspaceAdmin: new WorkspaceAdmin(dataSource, apiKeys, deployments, batchDeletion),
    signInLinks: new SignInLinks(dataSource, apiKeys, config.consoleSignInTtlMs, new SignInThrottle({
      perClientPerMinute: config.consoleSignInPerClientPerMinute, perServerPerMinute: config.consoleSignInPerServerPerMinute,
    })),
    publicUrl, managedStore, storageCredentials, requestRecords, requests, retention, webhooks,
    metrics, batches, fileUploads, batchRunner: runner, batchValidator, adapters, adapterDirectory, adapterResidency, adapterUsage, budget, quotas, workspaceBudgets, tenantQueries: tenantQueriesOf(dataSource), tracing,
    metricsHistory: new DeploymentMetrics(deploymentStore, metricsHistoryStore, new AutoscalingHistoryStore(dataSource)), minuteRollups, rollupWriter,
    requestLog: new RequestLog(dataSource, requestLogStore, () => apiKeys.clearCache()), requestLogRecorder,
    drainAgents: async () => {
      // No new claims while agents drain: queued work stays queued for the next server.
      await scheduler.stop();
      await runner.stop();
      // Background turns are cancelled and put back while their agents still answer (billed for what ran).
      await backgroundResponses.stop();
      await capacityLoop.stop();
      await capacity.stopAgents();
    },
    stop: () => lifecycle.stopAll(),
  };
}

/** What on this server has other machines dial its gRPC port: said when it listens on loopback only (AgentReach). */
async function remoteAgentNeeds(deployments: DeploymentStore, capacity: Capacity, clusterAddress: string | undefined): Promise<string[]> {
  const active = await deployments.listActive();
  const count = (provider: string) => active.filter((deployment) => deployment.provider === provider).length;
  const hosts = (await capacity.staticHosts.list()).length;
  const clusterHost = clusterAddress?.replace(/:\d+$/, '');
  return [
    count('external') ? `${count('external')} external deployment(s)` : '',
    hosts ? `${hosts} static host(s)` : '',
    capacity.kubernetes ? 'the Kubernetes provider (KUBERNETES_CONFIG_FILE)' : '',
    clusterHost && !isLoopbackBind(clusterHost) ? `peer servers relaying to CLUSTER_ADDRESS ${clusterAddress}` : '',
  ].filter(Boolean);
}

const HELD_BUDGETS = BUDGET_NAMES.filter((name) => BUDGETS[name].kind === 'held');

function databaseUrlOf(dataSource: DataSource): string {
  const url = (dataSource.options as { url?: string }).url;
  if (!url) throw new Error('the control plane needs a DataSource opened from a URL');
  return url;
}
