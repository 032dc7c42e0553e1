/**
 * A shared pool over in-memory collaborators: a catalog of literal models, a deployment store
 * that lists what the test put in it, the real events bus and Dispatcher, and agents that are
 * real AgentConnections (fakes.ts). Replicas are occupied by dispatching real owner and guest
 * jobs, so `inFlight` and `guestInFlight` are counted by the production code.
 */
import type { AgentConnection } from '../../../control-plane/dispatch/agent-connection';
import { Catalog, type CatalogModel } from '../../../control-plane/catalog/catalog';
import type { Peer } from '../../../control-plane/cluster/server-registry';
import type { Deployment } from '../../../control-plane/deployments/deployment.entity';
import type { DeploymentStore } from '../../../control-plane/deployments/deployment-store';
import { Dispatcher } from '../../../control-plane/dispatch/dispatcher';
import { ControlPlaneEvents } from '../../../control-plane/events/control-plane-events';
import { SharedPool } from '../../../control-plane/sharing/shared-pool';
import type { SharingConfig } from '../../../control-plane/sharing/sharing-config';
import { agent, RecordingListener, recordingLogger, request, reserveSlots } from './fakes';

export const SHARED_MODEL = 'acme/chat-8b';

export function chatModel(overrides: Partial<CatalogModel> = {}): CatalogModel {
  return {
    id: SHARED_MODEL, name: 'Chat 8B', modality: 'text', task: 'chat', engine: 'vllm', official: true, gpuMemoryGb: 24,
    inputModalities: ['text'], sizes: [], targetConcurrency: 8, sharedPricing: { inputPerMillion: 0.1, outputPerMillion: 0.4 },
    ...overrides,
  } as CatalogModel;
}

export function sharingConfig(overrides: Partial<SharingConfig> = {}): SharingConfig {
  return {
    ownerHeadroomFraction: 0.25, maxGuestsPerReplica: 16, defaultGuestMaxTokens: 256, busyRetryAfterSeconds: 1,
    reservationTtlMs: 180_000, availabilityIntervalMs: 1_000, settleIntervalMs: 250, creditLeaseIdleMs: 5_000, creditLeaseRequests: 32,
    fairShareWindowMs: 1_000, ...overrides,
  };
}

export function deployment(overrides: Partial<Deployment> = {}): Deployment {
  return {
    id: 'dep_a', workspaceId: 'ws_owner', modelId: SHARED_MODEL, status: 'Running', sharing: 'shared', ...overrides,
  } as Deployment;
}

/** What SharedPool reads of the deployments table: the shared ones. */
export class FakeDeploymentStore {
  shared: Deployment[] = [];
  failing = false;

  async listShared(): Promise<Deployment[]> {
    if (this.failing) throw new Error('database unreachable');
    return this.shared.filter((candidate) => candidate.sharing === 'shared');
  }
}

export interface ReplicaSpec {
  deploymentId?: string;
  max?: number;
  owners?: number;
  guests?: number;
  reserved?: number;
  priority?: boolean;
  draining?: boolean;
  closed?: boolean;
  engineKind?: string;
  workspaceId?: string;
  replicaId?: string;
  /** Adapter slots its Hello offered (0: it serves no LoRA adapter). */
  maxLoras?: number;
}

export function sharingWorld(options: { config?: Partial<SharingConfig>; models?: CatalogModel[]; peers?: Peer[] } = {}) {
  const dispatcher = new Dispatcher();
  const events = new ControlPlaneEvents();
  const store = new FakeDeploymentStore();
  const catalog = new Catalog(options.models ?? [chatModel()]);
  const config = sharingConfig(options.config);
  const log = recordingLogger();
  const peers: Peer[] = options.peers ?? [];
  const pool = new SharedPool(catalog, store as unknown as DeploymentStore, dispatcher, events, config, log.logger, () => peers);

  /** A deployment's sharing or status changed (on this server or relayed from another). */
  const update = (overrides: Partial<Deployment> = {}) => {
    const next = deployment(overrides);
    store.shared = [...store.shared.filter((existing) => existing.id !== next.id), next];
    events.emit('deploymentUpdated', next);
    return next;
  };

  /** A ready replica with `owners` owner jobs and `guests` guest jobs running. */
  const replica = (spec: ReplicaSpec = {}): AgentConnection => {
    const deploymentId = spec.deploymentId ?? 'dep_a';
    const { connection } = agent(dispatcher, {
      deploymentId, maxConcurrency: spec.max ?? 8, priorityScheduling: spec.priority ?? true, engineKind: spec.engineKind ?? 'vllm',
      workspaceId: spec.workspaceId ?? 'ws_owner', replicaId: spec.replicaId, maxLoras: spec.maxLoras ?? 0,
    });
    dispatcher.register(connection);
    occupy(connection, spec.owners ?? 0, spec.guests ?? 0);
    reserveSlots(connection, spec.reserved ?? 0);
    connection.draining = spec.draining ?? false;
    connection.closed = spec.closed ?? false;
    return connection;
  };

  const occupy = (connection: AgentConnection, owners: number, guests = 0) => {
    for (let index = 0; index < owners; index++) dispatcher.dispatchTo(connection, request({ deploymentId: connection.deploymentId }), new RecordingListener());
    for (let index = 0; index < guests; index++) {
      dispatcher.dispatchTo(connection, request({ deploymentId: connection.deploymentId, guest: true }), new RecordingListener());
    }
  };

  return { dispatcher, events, store, catalog, config, log, peers, pool, update, replica, occupy };
}

export function guestPeer(id: string, loads: Record<string, { guestReady: number; guestSlots: number }>): Peer {
  const load: Peer['load'] = {};
  for (const [deploymentId, guest] of Object.entries(loads)) {
    load[deploymentId] = { ready: guest.guestReady, freeSlots: guest.guestSlots, inFlight: 0, queued: 0, ...guest };
  }
  return { id, relayAddress: `${id}:7000`, load };
}
