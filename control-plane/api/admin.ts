/**
 * The admin port (docs/layers.md#the-door): what the GraphQL resolvers and the GraphQL server
 * use (deployments, replicas and capacity, keys, workspaces, billing, budgets, webhooks, storage
 * credentials, sharing, the catalog, console sign-in, the event bus for subscriptions, the
 * pipeline the console's playground runs its requests through, as `/v1` does), and the types
 * they speak.
 */
import type { ControlPlane } from '../main';

/** The operator's and the console's side of the platform; each member is the control plane's own service. */
export type AdminPort = Pick<ControlPlane,
  'config' | 'events' | 'tenantQueries' | 'budget' | 'workspaceBudgets' | 'apiKeys' | 'workspaceAdmin' | 'signInLinks'
  | 'deployments' | 'deploymentStore' | 'replicas' | 'replicaLogs' | 'capacityLoop' | 'capacity' | 'catalog' | 'catalogAdmin' | 'agentReach'
  | 'billing' | 'batches' | 'requests' | 'managedStore' | 'storageCredentials' | 'webhooks' | 'shared' | 'pipeline' | 'metricsHistory' | 'requestLog'
  | 'adapters' | 'adapterResidency' | 'adapterUsage' | 'fileUploads' | 'waitingForReplica'>;

export type { ApiKey } from '../api-keys/api-key.entity';
export type { CostGrouping, UsageGrouping } from '../billing/billing-queries';
export { BUDGETS } from '../budgets/budget-kinds';
export type { ControlPlaneEventMap, ControlPlaneEvents, ReplicaLoad } from '../events/control-plane-events';
export type { GpuOffer } from '../replicas/gpu-offer';
export type { Replica } from '../replicas/replica.entity';
export type { ReplicaLogLine } from '../replicas/replica-logs';
export type { StorageCredential } from '../storage/storage-credential.entity';
export type { WebhookAttempt } from '../webhooks/webhook.entities';
export type { MetricsPoint } from '../metrics-history/metrics-history-store';
export { sloOf } from '../deployments/scaling-settings';
export type { RequestLogBody, RequestLogEntry, RequestLogFilter, RequestLogPage } from '../request-log/request-log-store';
export type { RequestPhases } from '../pipeline/finished-request';
export type { Adapter } from '../adapters/adapter.entities';
export type { AdapterChange } from '../adapters/adapter-store';
