/**
 * Autoscaling counts adapter traffic toward its base deployment (issue 38, docs/adapters.md#usage):
 * a job addressed to a LoRA adapter is the owner's job like any other, so the in-flight count
 * the autoscaler reads (the connection's `ownerInFlight`, summed by the capacity loop on one
 * server and by the registry's load snapshot across servers) and the decision it makes are the
 * same for N adapter jobs as for N base-model jobs. Guests and batch lines stay out of it.
 */
import type { DataSource } from 'typeorm';
import pino from 'pino';
import type { ControlFrame } from '../../proto/worker/v1';
import { AgentConnection } from '../../control-plane/dispatch/agent-connection';
import { Dispatcher } from '../../control-plane/dispatch/dispatcher';
import type { DispatchRequest, JobListener } from '../../control-plane/dispatch/job';
import { ServerRegistry } from '../../control-plane/cluster/server-registry';
import { Autoscaler } from '../../control-plane/autoscaling/autoscaler';
import { newScalingState } from '../../control-plane/autoscaling/scaling-state';

const listener: JobListener = { onChunk: () => {}, onOutput: () => {}, onCompleted: () => {}, onFailed: () => {} };
const stream = { write: (_frame: ControlFrame) => true } as unknown as ConstructorParameters<typeof AgentConnection>[0];

function request(deploymentId: string, kind: 'base' | 'adapter' | 'guest' | 'batch', index: number): DispatchRequest {
  return {
    deploymentId, kind: 'JOB_KIND_CHAT_COMPLETION', body: Buffer.from('{}'), stream: false, includeUsage: false, deadlineUnixMs: 0,
    model: kind === 'adapter' ? `bot-${index % 3}` : 'meta-llama/Llama-3.1-8B-Instruct',
    ...(kind === 'adapter' ? {
      adapter: { name: `ad_${index % 3}.r1`, displayName: `bot-${index % 3}`, format: 'ADAPTER_FORMAT_GGUF', source: 'https://store/x', sha256: 'a'.repeat(64), sizeBytes: 1, rank: 8, scale: 0 },
    } : {}),
    ...(kind === 'guest' ? { guest: true } : {}),
    ...(kind === 'batch' ? { batch: true } : {}),
  };
}

/** One replica of `deploymentId` (adapter slots 2) on a real dispatcher, carrying `jobs`. */
function replicaCarrying(dispatcher: Dispatcher, deploymentId: string, jobs: Array<'base' | 'adapter' | 'guest' | 'batch'>): AgentConnection {
  const connection = new AgentConnection(stream, `agt-${deploymentId}`, `rep-${deploymentId}`, deploymentId, 64, dispatcher, 'ws', true, 'llama-cpp', true, false, 2, 0);
  connection.ready = true;
  dispatcher.register(connection);
  jobs.forEach((kind, index) => dispatcher.dispatchTo(connection, request(deploymentId, kind, index), listener));
  return connection;
}

describe('adapter jobs in the autoscaler\'s load', () => {
  const dispatcher = new Dispatcher();
  const adapters = replicaCarrying(dispatcher, 'dep_adapters', [...Array(40).fill('adapter'), 'guest', 'batch']);
  const base = replicaCarrying(dispatcher, 'dep_base', [...Array(40).fill('base'), 'guest', 'batch']);
  const mixed = replicaCarrying(dispatcher, 'dep_mixed', [...Array(20).fill('adapter'), ...Array(20).fill('base')]);

  test('a replica counts its adapter jobs as the owner\'s in-flight jobs, exactly as base-model jobs; guests and batch lines are left out', () => {
    expect([adapters.inFlight, adapters.ownerInFlight]).toEqual([42, 40]);
    expect(base.ownerInFlight).toBe(40);
    expect(mixed.ownerInFlight).toBe(40);
  });

  test('the registry\'s load snapshot (the cluster-wide autoscaling input) has the same in-flight for each deployment', () => {
    const registry = new ServerRegistry({} as DataSource, 'srv_test', '127.0.0.1:0', dispatcher, { heartbeatIntervalMs: 1_000, serverTimeoutMs: 5_000 }, pino({ level: 'silent' }));
    const load = registry.loadSnapshot();
    expect([load.dep_adapters.inFlight, load.dep_base.inFlight, load.dep_mixed.inFlight]).toEqual([40, 40, 40]);
  });

  test('the autoscaler scales a deployment of adapter traffic as it scales one of base traffic', () => {
    const autoscaler = new Autoscaler();
    const decide = (connection: AgentConnection) => autoscaler.decide(newScalingState(), {
      deploymentId: connection.deploymentId, inFlight: connection.ownerInFlight, queued: 0, currentReplicas: 1, readyReplicas: 1,
      targetConcurrency: 32, minReplicas: 1, maxReplicas: 4, autoscale: true,
    }, 1_000_000);
    const [fromAdapters, fromBase] = [decide(adapters), decide(base)];
    expect(fromAdapters.desiredReplicas).toBe(fromBase.desiredReplicas);
    // 40 jobs on a replica sized for 32: both ask for a second one.
    expect(fromBase.desiredReplicas).toBe(2);
  });

  test('a finished adapter job leaves the count as a finished base job does', () => {
    const job = dispatcher.dispatchTo(adapters, request('dep_adapters', 'adapter', 0), listener);
    expect(adapters.ownerInFlight).toBe(41);
    adapters.onJobEvent({ jobId: job.id, event: 'completed', completed: { usage: { promptTokens: 1, completionTokens: 1, totalTokens: 2, cachedTokens: 0 } } } as never);
    expect(adapters.ownerInFlight).toBe(40);
  });
});
