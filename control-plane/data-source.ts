import 'reflect-metadata';
import type { DataSource } from 'typeorm';
import { TenantAwareDataSource, TenantQueries, tenantReplication } from './database/tenant-queries';
import { ApiKey } from './api-keys/api-key.entity';
import { Deployment } from './deployments/deployment.entity';
import { Replica } from './replicas/replica.entity';
import { RequestRecord } from './requests/request-record.entity';
import { StorageCredential } from './storage/storage-credential.entity';
import { LedgerEntry } from './billing/ledger-entry.entity';
import { GpuHost } from './capacity/gpu-host.entity';
import { ScalingDecisionRecord } from './capacity/scaling-decision.entity';
import { WebhookAttempt, WebhookDelivery, WebhookEndpoint, WebhookEvent, WebhookSigningSecret } from './webhooks/webhook.entities';
import { UsageRecord } from './usage/usage-record.entity';
import { Workspace } from './workspaces/workspace.entity';
import { InitialSchema1763800000000 } from './database/migrations/1763800000000-initial-schema';
import { StorageCredentials1763900000000 } from './database/migrations/1763900000000-storage-credentials';
import { RequestRecords1764000000000 } from './database/migrations/1764000000000-request-records';
import { Webhooks1764100000000 } from './database/migrations/1764100000000-webhooks';
import { CapacityAndBilling1764200000000 } from './database/migrations/1764200000000-capacity-and-billing';
import { SharedServing1764400000000 } from './database/migrations/1764400000000-shared-serving';
import { WorkspacesAndLedger1764500000000 } from './database/migrations/1764500000000-workspaces-and-ledger';
import { ClusterServers1764600000000 } from './database/migrations/1764600000000-cluster-servers';
import { ConsoleSignInLinks1764700000000 } from './database/migrations/1764700000000-console-sign-in-links';
import { RoutingPolicy1764800000000 } from './database/migrations/1764800000000-routing-policy';
import { Batches1764900000000 } from './database/migrations/1764900000000-batches';
import { KubernetesProvider1765000000000 } from './database/migrations/1765000000000-kubernetes-provider';
import { BatchInputsInFiles1765200000000 } from './database/migrations/1765200000000-batch-inputs-in-files';
import { Batch, BatchFile, BatchLine } from './batches/batch.entities';
import { WorkspaceBudget } from './budgets/workspace-budget.entity';
import { TenantBudgets1765100000000 } from './database/migrations/1765100000000-tenant-budgets';
import { Responses1765300000000 } from './database/migrations/1765300000000-responses';
import { BackgroundResponses1765400000000 } from './database/migrations/1765400000000-background-responses';
import { UsageSharedModel1765500000000 } from './database/migrations/1765500000000-usage-shared-model';
import { TraceContext1765630000000 } from './database/migrations/1765630000000-trace-context';
import { ObservabilityHistory1765640000000 } from './database/migrations/1765640000000-observability-history';
import { ResponseRecord } from './responses/response-record.entity';
import { Adapter, AdapterAttachment, AdapterRevision } from './adapters/adapter.entities';
import { LoraAdapters1765700000000 } from './database/migrations/1765700000000-lora-adapters';
import { FileUploadClaims1765710000000 } from './database/migrations/1765710000000-file-upload-claims';
import { AutoscalingSlo1765800000000 } from './database/migrations/1765800000000-autoscaling-slo';
import { ColdStarts1765810000000 } from './database/migrations/1765810000000-cold-starts';
import { AutoscalingHistory1765820000000 } from './database/migrations/1765820000000-autoscaling-history';
import { RequestLogWithoutWorkspaceKey1765830000000 } from './database/migrations/1765830000000-request-log-without-workspace-key';
import { RequestLogPhaseArray1765840000000 } from './database/migrations/1765840000000-request-log-phase-array';
import { FileUploadClaim } from './batches/file-upload-claim.entity';

/**
 * Every module's tables. Each module keeps its entities beside its code; this list, at the
 * composition root, is the one place that names them all (database/ is core and knows none).
 */
export const ENTITIES = [
  Workspace, ApiKey, Deployment, Replica, UsageRecord, StorageCredential, RequestRecord,
  WebhookEndpoint, WebhookEvent, WebhookDelivery, WebhookAttempt, WebhookSigningSecret,
  GpuHost, LedgerEntry, ScalingDecisionRecord, BatchFile, Batch, BatchLine, WorkspaceBudget, ResponseRecord,
  Adapter, AdapterRevision, AdapterAttachment, FileUploadClaim,
];
export const MIGRATIONS = [
  InitialSchema1763800000000, StorageCredentials1763900000000, RequestRecords1764000000000, Webhooks1764100000000,
  CapacityAndBilling1764200000000, SharedServing1764400000000, WorkspacesAndLedger1764500000000, ClusterServers1764600000000, ConsoleSignInLinks1764700000000,
  RoutingPolicy1764800000000, Batches1764900000000, KubernetesProvider1765000000000, TenantBudgets1765100000000, BatchInputsInFiles1765200000000,
  Responses1765300000000,
  BackgroundResponses1765400000000,
  UsageSharedModel1765500000000,
  TraceContext1765630000000,
  ObservabilityHistory1765640000000,
  LoraAdapters1765700000000,
  FileUploadClaims1765710000000,
  AutoscalingSlo1765800000000,
  ColdStarts1765810000000,
  AutoscalingHistory1765820000000,
  RequestLogWithoutWorkspaceKey1765830000000,
  RequestLogPhaseArray1765840000000,
];

export interface DatabaseOptions {
  /**
   * `statement_timeout` of the queries a tenant's request causes (database/tenant-queries.ts),
   * which get a pool of their own; 0: no timeout and no second pool.
   */
  tenantStatementTimeoutMs?: number;
}

/** A DataSource for `url`; schema changes only through the checked-in migrations. */
export function createDataSource(url: string, options: DatabaseOptions = {}): TenantAwareDataSource {
  const timeoutMs = options.tenantStatementTimeoutMs ?? 0;
  return new TenantAwareDataSource({
    type: 'postgres',
    url,
    ...(timeoutMs > 0 ? { replication: tenantReplication(url, timeoutMs) } : {}),
    entities: ENTITIES,
    migrations: MIGRATIONS,
    migrationsRun: false,
    synchronize: false,
    uuidExtension: 'pgcrypto',
    // Each pool: the main one and, with a statement timeout, the tenants' (opened as they are used).
    extra: { max: 10 },
    logging: false,
  }, new TenantQueries(timeoutMs));
}

export async function openDatabase(url: string, options: DatabaseOptions = {}): Promise<TenantAwareDataSource> {
  const dataSource = createDataSource(url, options);
  await dataSource.initialize();
  await dataSource.runMigrations({ transaction: 'all' });
  return dataSource;
}

/** The tenant scope of `dataSource`: its own when it was opened here, else one that changes nothing (tests' plain DataSources). */
export function tenantQueriesOf(dataSource: DataSource): TenantQueries {
  return dataSource instanceof TenantAwareDataSource ? dataSource.tenantQueries : new TenantQueries(0);
}
