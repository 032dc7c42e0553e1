/**
 * The Kubernetes provider end to end without a cluster: a real server (provider `kubernetes`)
 * talks to an in-process fake API server through the official client and a real kubeconfig; a
 * test kubelet schedules each pod as the real scheduler would and runs its agent, fetched from
 * the server's download route and checked by SHA-256, as a real process with the CPU engine.
 * Every manifest the provider writes is validated against the Kubernetes schemas.
 */
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import type { V1PolicyRule, V1Pod } from '@kubernetes/client-node';
import yaml from 'js-yaml';
import { graphqlClient } from '../capacity/support/graphql-client';
import { startTestServer, waitFor, type TestServer, type TestWorkspace } from '../support/test-server';
import { FakeKubeApi } from './support/fake-kube-api';
import { ClusterView, runLifecycle } from './support/provider-scenario';
import { TestKubelet } from './support/test-kubelet';
import { validateManifest } from './support/validate-manifest';
import { modelCacheNodeLabel } from '../../control-plane/providers/kubernetes/replica-pod';

const NAMESPACE = 'inference';
const H100 = 'NVIDIA-H100-80GB-HBM3';
const L4 = 'NVIDIA-L4';

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

describe('the kubernetes provider (fake API server, test kubelet)', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'k8s-provider-test-'));
  let api: FakeKubeApi;
  let kubelet: TestKubelet;
  let test: TestServer;
  let workspace: TestWorkspace;
  let cluster: ClusterView;
  let serverOptions: Parameters<typeof startTestServer>[0];

  const replicasOf = (deploymentId: string) => test.server.controlPlane.replicas.list(deploymentId);
  const deploymentOf = (deploymentId: string) => test.server.controlPlane.deploymentStore.find(deploymentId);
  /** Deletes the deployment and waits for its pods to go, whatever the test's outcome (no cascade into the next test). */
  const cleanUp = async (deploymentId: string) => {
    await test.server.controlPlane.deployments.delete(workspace.workspaceId, deploymentId).catch(() => undefined);
    await waitFor(async () => (await cluster.pods(deploymentId)).length === 0, 20_000, 'the pods deleted');
  };

  beforeAll(async () => {
    // The API server enforces deploy/kubernetes/rbac.yaml: a call the provider makes beyond it is a 403 and fails the test.
    const rbac = (yaml.loadAll(fs.readFileSync(path.join(__dirname, '../../deploy/kubernetes/rbac.yaml'), 'utf8')) as Array<{ kind: string; rules?: V1PolicyRule[] }>);
    api = new FakeKubeApi({
      token: 'test-token',
      rbac: {
        user: `system:serviceaccount:${NAMESPACE}:inference-control-plane`, roleNamespace: NAMESPACE,
        roleRules: rbac.find((object) => object.kind === 'Role')!.rules, clusterRoleRules: rbac.find((object) => object.kind === 'ClusterRole')!.rules,
      },
    });
    await api.start();
    api.addNode({ name: 'gpu-a', labels: { 'nvidia.com/gpu.product': H100 }, allocatable: { 'nvidia.com/gpu': '2', cpu: '64', memory: '512Gi' }, taints: [{ key: 'nvidia.com/gpu', value: 'present', effect: 'NoSchedule' }] });
    api.addNode({ name: 'gpu-b', labels: { 'nvidia.com/gpu.product': H100 }, allocatable: { 'nvidia.com/gpu': '2', cpu: '64', memory: '512Gi' }, taints: [{ key: 'nvidia.com/gpu', value: 'present', effect: 'NoSchedule' }] });
    kubelet = new TestKubelet(api, { agentEnvOverrides: { WORKER_ENGINE: 'cpu', WORKER_RECONNECT_INITIAL_MS: '20', WORKER_RECONNECT_MAX_MS: '200', WORKER_DRAIN_TIMEOUT_MS: '2000' }, graceScale: 0.05, restartBackoffMs: 50 });
    kubelet.start();
    const kubeconfig = api.writeKubeconfig(path.join(dir, 'kubeconfig'), NAMESPACE);
    const grpcPort = await freePort();
    const httpPort = await freePort();
    const configFile = path.join(dir, 'kubernetes.yaml');
    fs.writeFileSync(configFile, JSON.stringify({
      namespace: NAMESPACE, kubeconfig, controlPlaneGrpcAddress: `127.0.0.1:${grpcPort}`, controlPlaneHttpUrl: `http://127.0.0.1:${httpPort}`,
      terminationGracePeriodSeconds: 40, terminateWaitSeconds: 10, failureBackoffSeconds: 1, watchRestartSeconds: 0.2,
      // A cache on each node's disk: a model's next pods prefer the nodes that hold its weights.
      modelCache: { hostPath: '/var/lib/inference-models', mountPath: '/models' },
      gpuClasses: [
        { product: H100, gpuMemoryGb: 80, pricePerGpuHour: 2.49, tolerations: [{ key: 'nvidia.com/gpu', operator: 'Exists', effect: 'NoSchedule' }] },
        // No toleration: its tainted nodes are offered (GPUs free) but the scheduler refuses them.
        { product: L4, gpuMemoryGb: 24, pricePerGpuHour: 0.8 },
      ],
    }));
    serverOptions = { controlPlane: { grpcPort, kubernetesConfigFile: configFile, capacityIntervalMs: 300, localAgents: false } as never, gateway: { port: httpPort } };
    test = await startTestServer(serverOptions);
    workspace = await test.createWorkspace();
    cluster = new ClusterView(api.kubeConfig(NAMESPACE), NAMESPACE);
  });

  afterAll(async () => {
    await test?.stop();
    await kubelet?.stop();
    await api?.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  const validPod = (pod: V1Pod) => validateManifest({ ...pod, apiVersion: 'v1', kind: 'Pod' });

  it('runs a deployment as pods: ready, answering, scaled up and down, deleted with its pods and secret', async () => {
    await runLifecycle(test, workspace, cluster, { readyTimeoutMs: 60_000, checkPod: validPod });
    // Everything the provider wrote is a valid Kubernetes object, and nothing it asked was refused.
    for (const written of api.created()) validateManifest(written as never);
    expect(api.requests.filter((request) => request.status === 403)).toEqual([]);
  });

  it('GraphQL (what the console reads) lists the provider and its offers: free GPUs per class at the configured price', async () => {
    const graphql = graphqlClient(test.url, workspace.apiKey);
    const { data } = await graphql('{ capacityProviders gpuOffers(provider: "kubernetes") { provider gpuName gpuMemoryGb pricePerHour available } }');
    expect(data.capacityProviders).toContain('kubernetes');
    expect(data.capacityProviders).not.toContain('local');
    // Two H100 nodes with 2 free GPUs each: 1- and 2-GPU shapes, cheapest first.
    expect(data.gpuOffers.map((offer: { provider: string; gpuName: string; pricePerHour: number }) => [offer.provider, offer.gpuName, offer.pricePerHour]))
      .toEqual([['kubernetes', H100, 2.49], ['kubernetes', `2× ${H100}`, 4.98]]);
    const refused = await graphql('{ gpuOffers(provider: "local") { id } }');
    expect(refused.errors?.[0]).toMatchObject({ message: expect.stringContaining('kubernetes'), extensions: { param: 'provider' } });
  });

  it('a price cap below every GPU class places nothing and says why', async () => {
    const deployment = await test.createDeployment(workspace, { provider: 'kubernetes', priceCapPerHour: 0.5 });
    try {
      await test.server.controlPlane.capacityLoop.runOnce();
      await waitFor(async () => /no offer at or under \$0\.50\/h/.test((await deploymentOf(deployment.id))?.statusReason ?? ''), 10_000, 'the price-cap reason');
      expect((await deploymentOf(deployment.id))?.statusReason).toContain(`the cheapest that fits is ${H100} in inference at $2.49/h`);
      expect(await cluster.pods(deployment.id)).toHaveLength(0);
    } finally {
      await cleanUp(deployment.id);
    }
  });

  it('a pod that cannot be scheduled waits for GPU capacity with the scheduler\'s reason, and runs once a node takes it', async () => {
    // Cheap enough for the L4 class only: its node is tainted, and the class does not tolerate it.
    api.addNode({ name: 'l4-a', labels: { 'nvidia.com/gpu.product': L4 }, allocatable: { 'nvidia.com/gpu': '1', cpu: '16', memory: '64Gi' }, taints: [{ key: 'dedicated', value: 'batch', effect: 'NoSchedule' }] });
    const deployment = await test.createDeployment(workspace, { provider: 'kubernetes', priceCapPerHour: 1, modelId: 'BAAI/bge-large-en-v1.5' });
    try {
      await waitFor(async () => ((await replicasOf(deployment.id))[0]?.statusReason ?? '').startsWith('waiting for GPU capacity: 0/'), 20_000, 'the unschedulable reason on the replica');
      const [replica] = await replicasOf(deployment.id);
      expect(replica.status).toBe('Creating');
      expect(replica.statusReason).toMatch(/^waiting for GPU capacity: 0\/\d+ nodes are available: .*untolerated taint \{dedicated: batch\}/);
      // The console's deployment page reads the same reason through GraphQL.
      const { data } = await graphqlClient(test.url, workspace.apiKey)(`{ deployment(id: "${deployment.id}") { replicas { status statusReason } } }`);
      expect(data.deployment.replicas).toEqual([{ status: 'Creating', statusReason: replica.statusReason }]);
      // A node it tolerates: the scheduler binds it, the agent joins, the replica runs.
      api.removeNode('l4-a');
      api.addNode({ name: 'l4-b', labels: { 'nvidia.com/gpu.product': L4 }, allocatable: { 'nvidia.com/gpu': '1', cpu: '16', memory: '64Gi' } });
      await test.waitForReplicas(deployment.id, 1, 60_000);
      expect((await replicasOf(deployment.id))[0]).toMatchObject({ id: replica.id, status: 'Running', gpuName: L4 });
    } finally {
      await cleanUp(deployment.id);
      api.removeNode('l4-a');
      api.removeNode('l4-b');
    }
  });

  it('an image that cannot be pulled ends the replica with the kubelet\'s message and backs off before the next pod', async () => {
    kubelet.failImagePull('vllm/vllm-openai:v0.11.0');
    const deployment = await test.createDeployment(workspace, { provider: 'kubernetes', priceCapPerHour: 10 });
    try {
      await waitFor(async () => (await replicasOf(deployment.id)).some((replica) => replica.status === 'Terminated'), 30_000, 'the replica ended');
      const failed = (await replicasOf(deployment.id)).find((replica) => replica.status === 'Terminated')!;
      expect(failed.statusReason).toMatch(/^container engine image vllm\/vllm-openai:v0\.11\.0 cannot be pulled \((ErrImagePull|ImagePullBackOff)\)/);
      await waitFor(async () => /back-off before the next pod, because the last one failed: container engine image/.test((await deploymentOf(deployment.id))?.statusReason ?? ''), 10_000, 'the back-off on the deployment');
      // The image is there again: after the back-off a new pod runs.
      kubelet.failImagePull(null);
      await test.waitForReplicas(deployment.id, 1, 60_000);
    } finally {
      kubelet.failImagePull(null);
      await cleanUp(deployment.id);
    }
  });

  it('a crash-looping agent ends the replica with its exit code and last output', async () => {
    kubelet.setAgentEnv({ WORKER_MAX_CONCURRENCY: '0' });
    const deployment = await test.createDeployment(workspace, { provider: 'kubernetes', priceCapPerHour: 10 });
    try {
      await waitFor(async () => (await replicasOf(deployment.id)).some((replica) => replica.status === 'Terminated'), 30_000, 'the replica ended');
      const failed = (await replicasOf(deployment.id)).find((replica) => replica.status === 'Terminated')!;
      expect(failed.statusReason).toMatch(/^container agent is crash-looping: exit code \d+/);
      expect(failed.statusReason).toContain('WORKER_MAX_CONCURRENCY');
    } finally {
      kubelet.setAgentEnv({});
      await cleanUp(deployment.id);
    }
  });

  it('a model\'s pod goes to a node labelled as holding its weights, then to the node its pods ran on (a host-path cache)', async () => {
    // A model no other test runs: no node has run its pods before.
    const modelId = 'Qwen/Qwen2.5-7B';
    const label = modelCacheNodeLabel(modelId);
    // Both nodes fit, and the scheduler's tie goes to gpu-a (first by name): the operator's label puts the pod on gpu-b.
    api.updateNode('gpu-b', (node) => { node.metadata!.labels![label] = 'cached'; });
    const first = await test.createDeployment(workspace, { provider: 'kubernetes', priceCapPerHour: 10, modelId });
    try {
      await test.waitForReplicas(first.id, 1, 60_000);
      const [pod] = await cluster.livePods(first.id);
      validPod(pod);
      expect(pod.spec?.nodeName).toBe('gpu-b');
      expect(pod.spec?.affinity?.nodeAffinity?.preferredDuringSchedulingIgnoredDuringExecution).toEqual(
        [{ weight: 100, preference: { matchExpressions: [{ key: label, operator: 'Exists' }] } }]);
    } finally {
      await cleanUp(first.id);
      api.updateNode('gpu-b', (node) => { delete node.metadata!.labels![label]; });
    }
    // No label any more: its earlier pod ran on gpu-b, whose disk keeps what it downloaded.
    const second = await test.createDeployment(workspace, { provider: 'kubernetes', priceCapPerHour: 10, modelId });
    try {
      await test.waitForReplicas(second.id, 1, 60_000);
      const [pod] = await cluster.livePods(second.id);
      expect(pod.spec?.nodeName).toBe('gpu-b');
      expect(pod.spec?.affinity?.nodeAffinity?.preferredDuringSchedulingIgnoredDuringExecution?.[1]).toEqual(
        { weight: 50, preference: { matchFields: [{ key: 'metadata.name', operator: 'In', values: ['gpu-b'] }] } });
    } finally {
      await cleanUp(second.id);
    }
  });

  it('a control-plane restart keeps running pods (their agents rejoin), deletes orphans and creates no duplicate', async () => {
    const deployment = await test.createDeployment(workspace, { provider: 'kubernetes', priceCapPerHour: 10 });
    await test.waitForReplicas(deployment.id, 1, 60_000);
    const [before] = await cluster.livePods(deployment.id);
    const [replica] = await test.server.controlPlane.replicas.listActive(deployment.id);
    await test.stop({ keepDatabase: true, keepData: true });
    // While no server watches: a pod whose replica does not exist appears (a leftover).
    api.createPod(NAMESPACE, {
      ...before, metadata: { name: 'inference-rep-leftover', namespace: NAMESPACE, labels: { ...before.metadata!.labels, 'inference-platform/replica-id': 'rep_leftover' } },
      status: undefined,
    } as V1Pod);
    test = await startTestServer({ ...serverOptions, databaseUrl: test.databaseUrl, dataDir: test.dataDir });
    await test.waitForReplicas(deployment.id, 1, 60_000);
    const [after] = await test.server.controlPlane.replicas.listActive(deployment.id);
    expect(after.id).toBe(replica.id);
    await waitFor(async () => (await cluster.pods()).every((pod) => pod.metadata?.name !== 'inference-rep-leftover'), 20_000, 'the leftover pod deleted');
    const pods = await cluster.livePods(deployment.id);
    expect(pods.map((pod) => pod.metadata?.uid)).toEqual([before.metadata?.uid]);
    await cleanUp(deployment.id);
  });
});
