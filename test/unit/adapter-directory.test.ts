/**
 * The request path's view of adapters (adapters/adapter-directory.ts) and where they are
 * loaded (adapter-residency.ts), over in-memory inputs: a job's AdapterRef names the revision
 * for the engine and the adapter for the client, its link lives until the job's deadline, and an
 * adapter not attached to the deployment (or another workspace's) resolves to nothing.
 */
import { Adapter, AdapterRevision } from '../../control-plane/adapters/adapter.entities';
import { AdapterDirectory } from '../../control-plane/adapters/adapter-directory';
import { AdapterResidency } from '../../control-plane/adapters/adapter-residency';
import type { AdapterEntry } from '../../control-plane/adapters/adapter-store';
import type { AgentConnection } from '../../control-plane/dispatch/agent-connection';
import type { Deployment } from '../../control-plane/deployments/deployment.entity';

const NOW = 1_800_000_000_000;
const adapter = Object.assign(new Adapter(), { id: 'ad_1', workspaceId: 'ws_a', name: 'support-bot', baseModel: 'org/base', revision: 3, createdAt: new Date(NOW) });
const weights = Object.assign(new AdapterRevision(), {
  adapterId: 'ad_1', revision: 3, format: 'GGUF', rank: 16, sourceKind: 'FILE', sourceRef: 'file-1', objectKey: 'ws_a/adapters/ad_1/r3', sha256: 'ab'.repeat(32), sizeBytes: 4096,
});
const entry: AdapterEntry = { adapter, weights, deploymentIds: new Set(['dep_1']) };

function directory() {
  const signed: Array<{ key: string; ttl: number }> = [];
  const store = { ofWorkspace: async (workspaceId: string) => new Map(workspaceId === 'ws_a' ? [['support-bot', entry]] : []) };
  const presign = { presignGet: async (key: string, ttl: number) => { signed.push({ key, ttl }); return `https://store/${key}?ttl=${ttl}`; } };
  return { directory: new AdapterDirectory(store, presign, { minLinkTtlSeconds: 300 }, () => NOW), signed };
}

describe('AdapterDirectory', () => {
  test('an attached adapter: the revision\'s engine name, the client\'s name, a link until the deadline', async () => {
    const { directory: found, signed } = directory();
    const addressed = await found.onDeployment('ws_a', { id: 'dep_1' }, 'support-bot', NOW + 900_000);
    expect(addressed).toEqual({
      ref: {
        name: 'ad_1.r3', displayName: 'support-bot', format: 'ADAPTER_FORMAT_GGUF', source: 'https://store/ws_a/adapters/ad_1/r3?ttl=900',
        sha256: 'ab'.repeat(32), sizeBytes: 4096, rank: 16, scale: 0,
      },
      adapter: { id: 'ad_1', name: 'support-bot', revision: 3 },
    });
    await found.onDeployment('ws_a', { id: 'dep_1' }, 'support-bot', NOW + 10_000);
    expect(signed[1]).toEqual({ key: 'ws_a/adapters/ad_1/r3', ttl: 300 });
  });

  test('not attached here, another workspace, or no such name: nothing', async () => {
    const { directory: found } = directory();
    expect(await found.onDeployment('ws_a', { id: 'dep_2' }, 'support-bot', NOW)).toBeNull();
    expect(await found.onDeployment('ws_b', { id: 'dep_1' }, 'support-bot', NOW)).toBeNull();
    expect(await found.onDeployment('ws_a', { id: 'dep_1' }, 'ad_1.r3', NOW)).toBeNull();
  });

  test('the single base URL picks a running deployment it is attached to', async () => {
    const { directory: found } = directory();
    const deployments = [
      { id: 'dep_0', status: 'Running' }, { id: 'dep_1', status: 'Running' },
    ] as Deployment[];
    expect((await found.deploymentFor('ws_a', 'support-bot', deployments))?.id).toBe('dep_1');
    expect(await found.deploymentFor('ws_a', 'support-bot', [deployments[0]])).toBeNull();
    expect(await found.deploymentFor('ws_b', 'support-bot', deployments)).toBeNull();
  });
});

describe('AdapterResidency', () => {
  test('each replica\'s hold of any revision of the adapter, from the latest heartbeat', () => {
    const connection = (replicaId: string, adapters: unknown[]) => ({ replicaId, heartbeat: { adapters } }) as unknown as AgentConnection;
    const pools: Record<string, AgentConnection[]> = {
      dep_1: [
        connection('rep_1', [{ name: 'ad_1.r3', state: 'ADAPTER_STATE_GPU', loadMs: 41, error: '', lastUsedUnixMs: NOW }, { name: 'ad_10.r1', state: 'ADAPTER_STATE_GPU', loadMs: 1, error: '', lastUsedUnixMs: 0 }]),
        connection('rep_2', [{ name: 'ad_1.r2', state: 'ADAPTER_STATE_FAILED', loadMs: 0, error: 'rank too big', lastUsedUnixMs: 0 }]),
      ],
    };
    const residency = new AdapterResidency({ connections: (deploymentId?: string) => pools[deploymentId!] ?? [] });
    expect(residency.of('ad_1', ['dep_1', 'dep_9'])).toEqual([
      { replicaId: 'rep_1', deploymentId: 'dep_1', revision: 3, state: 'GPU', loadMs: 41, error: null, lastUsedAt: new Date(NOW) },
      { replicaId: 'rep_2', deploymentId: 'dep_1', revision: 2, state: 'FAILED', loadMs: 0, error: 'rank too big', lastUsedAt: null },
    ]);
  });
});
