/**
 * The Kubernetes provider's end-to-end path, the same against the in-process fake API server
 * (`npm test`) and against a real cluster (`npm run test:k8s`): a deployment on provider
 * `kubernetes` → its pod → the agent joins → chat and a stream answered through the official
 * `openai` SDK → scale up and down (the pod deleted after its drain) → delete the deployment
 * (its pods and Secret gone). The cluster is read through the official client only.
 */
import { CoreV1Api, type KubeConfig, type V1Pod, type V1Secret } from '@kubernetes/client-node';
import OpenAI from 'openai';
import { waitFor, type TestServer, type TestWorkspace } from '../../support/test-server';

export const MANAGED = 'app.kubernetes.io/managed-by=inference-platform';

export class ClusterView {
  private readonly core: CoreV1Api;

  constructor(kubeConfig: KubeConfig, readonly namespace: string) {
    this.core = kubeConfig.makeApiClient(CoreV1Api);
  }

  async pods(deploymentId?: string): Promise<V1Pod[]> {
    const selector = deploymentId ? `${MANAGED},inference-platform/deployment-id=${deploymentId}` : MANAGED;
    return (await this.core.listNamespacedPod({ namespace: this.namespace, labelSelector: selector })).items;
  }

  async secrets(deploymentId?: string): Promise<V1Secret[]> {
    const selector = deploymentId ? `${MANAGED},inference-platform/deployment-id=${deploymentId}` : MANAGED;
    return (await this.core.listNamespacedSecret({ namespace: this.namespace, labelSelector: selector })).items;
  }

  /** Pods of the deployment not being deleted. */
  async livePods(deploymentId: string): Promise<V1Pod[]> {
    return (await this.pods(deploymentId)).filter((pod) => !pod.metadata?.deletionTimestamp);
  }
}

export interface LifecycleOptions {
  readonly modelId?: string;
  readonly priceCapPerHour?: number;
  /** How long a replica may take to be ready (a real cluster pulls images). */
  readonly readyTimeoutMs: number;
  /** Called with every pod the provider wrote (schema validation). */
  readonly checkPod?: (pod: V1Pod) => void;
}

/** Runs the whole path; returns what a caller may check further. */
export async function runLifecycle(test: TestServer, workspace: TestWorkspace, cluster: ClusterView, options: LifecycleOptions): Promise<void> {
  const { controlPlane } = test.server;
  const deployment = await test.createDeployment(workspace, {
    provider: 'kubernetes', priceCapPerHour: options.priceCapPerHour ?? 10, minReplicas: 1, maxReplicas: 1,
    ...(options.modelId ? { modelId: options.modelId } : {}),
  });
  await test.waitForReplicas(deployment.id, 1, options.readyTimeoutMs);
  const [pod] = await cluster.livePods(deployment.id);
  expect(pod).toBeDefined();
  options.checkPod?.(pod);
  const [replica] = await controlPlane.replicas.listActive(deployment.id);
  expect(replica).toMatchObject({ provider: 'kubernetes', status: 'Running' });
  expect(pod.metadata?.labels?.['inference-platform/replica-id']).toBe(replica.id);
  expect(replica.offerId).toMatch(/^kubernetes:/);

  const client = new OpenAI({ baseURL: deployment.baseUrl, apiKey: workspace.apiKey, maxRetries: 0 });
  const modelId = (await controlPlane.deploymentStore.find(deployment.id))!.modelId;
  const answer = await client.chat.completions.create({ model: modelId, messages: [{ role: 'user', content: 'hello from a pod' }], max_tokens: 8 });
  expect(answer.choices[0].message.content?.length).toBeGreaterThan(0);
  let streamed = '';
  const stream = await client.chat.completions.create({ model: answer.model, messages: [{ role: 'user', content: 'stream from a pod' }], max_tokens: 8, stream: true });
  for await (const chunk of stream) streamed += chunk.choices[0]?.delta?.content ?? '';
  expect(streamed.length).toBeGreaterThan(0);

  // Scale up: a second pod, a second replica.
  await controlPlane.deployments.update(workspace.workspaceId, deployment.id, { minReplicas: 2, maxReplicas: 2 });
  await controlPlane.capacityLoop.runOnce();
  await test.waitForReplicas(deployment.id, 2, options.readyTimeoutMs);
  expect(await cluster.livePods(deployment.id)).toHaveLength(2);
  expect((await cluster.secrets(deployment.id))).toHaveLength(1);

  // Scale down: one replica ends (drained), its pod is deleted, its token leaves the Secret.
  await controlPlane.deployments.update(workspace.workspaceId, deployment.id, { minReplicas: 1, maxReplicas: 1 });
  await controlPlane.capacityLoop.runOnce();
  await waitFor(async () => (await cluster.pods(deployment.id)).length === 1, options.readyTimeoutMs, 'one pod left after scaling down');
  const ended = (await controlPlane.replicas.list(deployment.id)).filter((candidate) => candidate.status === 'Terminated');
  expect(ended).toHaveLength(1);
  expect(ended[0].statusReason).toBe('scaled down');
  const [secret] = await cluster.secrets(deployment.id);
  expect(Object.keys(secret.data ?? {})).toEqual([(await controlPlane.replicas.listActive(deployment.id))[0].id]);
  // Still serving.
  expect((await client.chat.completions.create({ model: answer.model, messages: [{ role: 'user', content: 'still there?' }], max_tokens: 4 })).choices).toHaveLength(1);

  // Delete: every pod and the Secret go.
  await controlPlane.deployments.delete(workspace.workspaceId, deployment.id);
  await waitFor(async () => (await cluster.pods(deployment.id)).length === 0 && (await cluster.secrets(deployment.id)).length === 0, options.readyTimeoutMs, 'no pod and no secret left');
}
