/**
 * `npm run test:k8s`: the provider end to end against the cluster KUBECONFIG names (the
 * requirements and the kind/k3s steps are in run-cluster-test.cjs). Not part of `npm test`.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import { startTestServer, type TestServer } from '../../support/test-server';
import { validateManifest } from '../support/validate-manifest';
import { ClusterView, runLifecycle } from '../support/provider-scenario';

const env = process.env;
const namespace = env.K8S_NAMESPACE ?? 'inference-test';
const host = env.K8S_CONTROL_PLANE_HOST ?? '';
const grpcPort = Number(env.K8S_GRPC_PORT ?? 50551);
const httpPort = Number(env.K8S_HTTP_PORT ?? 18080);
const product = env.K8S_GPU_PRODUCT ?? 'TEST-GPU';
const realEngine = env.K8S_REAL_ENGINE === 'true';

describe(`the kubernetes provider on the cluster of ${env.KUBECONFIG}`, () => {
  let test: TestServer;
  let cluster: ClusterView;
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'k8s-cluster-test-'));

  beforeAll(async () => {
    if (!host) throw new Error('set K8S_CONTROL_PLANE_HOST to an address of this machine the pods can reach (see run-cluster-test.cjs)');
    const file = path.join(dir, 'kubernetes.yaml');
    fs.writeFileSync(file, JSON.stringify({
      namespace, kubeconfig: env.KUBECONFIG, controlPlaneGrpcAddress: `${host}:${grpcPort}`, controlPlaneHttpUrl: `http://${host}:${httpPort}`,
      terminationGracePeriodSeconds: 40, terminateWaitSeconds: 60, failureBackoffSeconds: 5,
      gpuClasses: [{ product, gpuMemoryGb: 80, pricePerGpuHour: 1 }],
      ...(realEngine ? {} : {
        engineImages: { vllm: env.K8S_ENGINE_IMAGE ?? 'debian:bookworm-slim' }, engineCommand: ['sh', '-c', 'exec sleep infinity', '--'],
        agentEnv: { WORKER_ENGINE: 'cpu' },
      }),
    }));
    test = await startTestServer({
      controlPlane: { grpcHost: '0.0.0.0', grpcPort, kubernetesConfigFile: file, capacityIntervalMs: 1_000 },
      gateway: { host: '0.0.0.0', port: httpPort },
    });
    const kubeConfig = new KubeConfig();
    kubeConfig.loadFromFile(env.KUBECONFIG!);
    cluster = new ClusterView(kubeConfig, namespace);
  });

  afterAll(async () => {
    await test?.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('runs a deployment as pods: ready, answering, scaled up and down, deleted with its pods and secret', async () => {
    const workspace = await test.createWorkspace();
    await runLifecycle(test, workspace, cluster, { readyTimeoutMs: 600_000, checkPod: (pod) => validateManifest({ apiVersion: 'v1', kind: 'Pod', ...pod }) });
  });
});
