/**
 * The manifests the Kubernetes provider writes: one Secret per deployment (the join token of each
 * of its replicas, by replica id) and one Pod per replica, owned by that Secret so that deleting
 * it (the deployment's last replica gone, or the deployment deleted) lets Kubernetes' garbage
 * collector remove any pod left behind. Pure functions: tests validate their output against the
 * real Kubernetes schemas.
 */
import { createHash } from 'node:crypto';
import type { V1Affinity, V1Container, V1EnvVar, V1Pod, V1Secret, V1Volume, V1VolumeMount } from '@kubernetes/client-node';
import { loraAgentEnv, type LoraSettings } from '../../deployments/lora-settings';
import type { EngineContainerSpec } from './engine-container';
import type { GpuClass, KubernetesConfig } from './kubernetes-config';

export const MANAGED_BY = 'inference-platform';
export const LABELS = {
  managedBy: 'app.kubernetes.io/managed-by',
  deploymentId: 'inference-platform/deployment-id',
  replicaId: 'inference-platform/replica-id',
  /** The model a pod serves, as `modelLabelValue` spells it: the provider remembers the nodes it ran on. */
  model: 'inference-platform/model',
} as const;
/**
 * The prefix of the node labels that say a node's model-cache volume holds a model's weights
 * (`models.inference-platform/meta-llama.Llama-3.1-8B-Instruct`, any value): set by the operator
 * (the agents hold no credentials to label nodes), preferred by the pods of that model.
 */
export const MODEL_CACHE_NODE_LABEL = 'models.inference-platform';

/** Where the init container puts the agent, and where the agent container finds it. */
export const AGENT_DIR = '/agent';
export const AGENT_BINARY = `${AGENT_DIR}/worker-agent`;

/** `dep_AbC` → `inference-dep-abc`: object names are DNS-1123 (lowercase, digits and -). */
export function objectName(prefix: string, id: string): string {
  return `${prefix}-${id.toLowerCase().replace(/[^a-z0-9-]+/g, '-')}`.slice(0, 63).replace(/-+$/, '');
}

export function secretName(config: Pick<KubernetesConfig, 'namePrefix'>, deploymentId: string): string {
  return objectName(config.namePrefix, deploymentId);
}

export function podName(config: Pick<KubernetesConfig, 'namePrefix'>, replicaId: string): string {
  return objectName(config.namePrefix, replicaId);
}

/** The deployment's Secret: `tokens` maps replica ids to their join tokens. */
export function deploymentSecret(config: KubernetesConfig, deploymentId: string, tokens: Record<string, string>, resourceVersion?: string): V1Secret {
  return {
    apiVersion: 'v1', kind: 'Secret', type: 'Opaque',
    metadata: {
      name: secretName(config, deploymentId), namespace: config.namespace,
      labels: { [LABELS.managedBy]: MANAGED_BY, [LABELS.deploymentId]: deploymentId },
      ...(resourceVersion ? { resourceVersion } : {}),
    },
    stringData: tokens,
  };
}

/**
 * A model id as a label name or value (at most 63 of `[A-Za-z0-9._-]`, alphanumeric at both
 * ends): `/` becomes `.`, anything else outside the set `-`; a longer id keeps its first 50
 * characters and a hash of the whole, so two ids never share one.
 */
export function modelLabelValue(modelId: string): string {
  const plain = modelId.replaceAll('/', '.').replace(/[^A-Za-z0-9._-]/g, '-').replace(/^[^A-Za-z0-9]+|[^A-Za-z0-9]+$/g, '');
  if (plain.length > 0 && plain.length <= 63) return plain;
  const hash = createHash('sha256').update(modelId).digest('hex').slice(0, 12);
  return `${plain.slice(0, 50).replace(/[^A-Za-z0-9]+$/, '')}-${hash}`.replace(/^-/, '');
}

/** The node label an operator sets on nodes whose cache holds `modelId` (see MODEL_CACHE_NODE_LABEL). */
export function modelCacheNodeLabel(modelId: string): string {
  return `${MODEL_CACHE_NODE_LABEL}/${modelLabelValue(modelId)}`;
}

export interface ReplicaPodInput {
  readonly deploymentId: string;
  readonly replicaId: string;
  /** The catalog model the replica serves: its pod is labelled with it and prefers nodes caching it. */
  readonly modelId: string;
  /** Nodes whose host-path model cache should hold the model (a pod of it ran there): preferred, after operator-labelled ones. */
  readonly cachedNodes?: readonly string[];
  /** The deployment's Secret (the pod's owner, and where its join token is). */
  readonly secret: { readonly name: string; readonly uid: string };
  readonly engine: EngineContainerSpec;
  readonly gpus: number;
  readonly gpuClass: GpuClass;
  readonly agent: {
    /** The versioned download route of the control plane, and the binary's SHA-256 (hex). */
    readonly url: string;
    readonly sha256: string;
    readonly maxConcurrency: number;
    readonly priorityScheduling: boolean;
    /** The deployment's adapter capacity, offered in the agent's Hello (absent: the agent's defaults). */
    readonly lora?: LoraSettings;
  };
}

/** The agent drains this long at most (its default WORKER_DRAIN_TIMEOUT_MS): the engine must outlive it. */
const AGENT_DRAIN_SECONDS = 30;

export function replicaPod(config: KubernetesConfig, input: ReplicaPodInput): V1Pod {
  const { engine, gpuClass } = input;
  const gpuLimit = { [config.gpuResource]: String(input.gpus) };
  const volumes: V1Volume[] = [
    { name: 'agent-bin', emptyDir: {} },
    { name: 'dshm', emptyDir: { medium: 'Memory', sizeLimit: config.shmSize } },
  ];
  const engineMounts: V1VolumeMount[] = [{ name: 'dshm', mountPath: '/dev/shm' }];
  if (config.modelCache) {
    volumes.push({
      name: 'model-cache',
      ...(config.modelCache.persistentVolumeClaim
        ? { persistentVolumeClaim: { claimName: config.modelCache.persistentVolumeClaim } }
        : { hostPath: { path: config.modelCache.hostPath!, type: 'DirectoryOrCreate' } }),
    });
    engineMounts.push({ name: 'model-cache', mountPath: config.modelCache.mountPath });
  }
  const cacheDir = config.modelCache?.mountPath;
  const engineContainer: V1Container = {
    name: 'engine', image: engine.image,
    // A crash's last output becomes the container's termination message (the replica's reason).
    terminationMessagePolicy: 'FallbackToLogsOnError',
    ...(config.engineCommand ?? engine.command ? { command: config.engineCommand ?? engine.command } : {}),
    args: engine.args,
    ports: [{ name: 'http', containerPort: engine.port }],
    resources: { limits: gpuLimit, requests: gpuLimit },
    volumeMounts: engineMounts,
    env: [
      ...(config.huggingFaceTokenSecret ? [{ name: 'HF_TOKEN', valueFrom: { secretKeyRef: { name: config.huggingFaceTokenSecret, key: 'HF_TOKEN' } } }] : []),
      // Hugging Face downloads (vLLM's, SGLang's) go to the cache volume whatever user the image runs as.
      ...(cacheDir ? [{ name: 'HF_HOME', value: cacheDir }] : []),
      ...Object.entries(engine.env ?? {}).map(([name, value]) => ({ name, value })),
    ],
    // Weights take minutes to download and load: up to 30 min before the readiness checks start.
    startupProbe: { httpGet: { path: '/health', port: engine.port }, periodSeconds: 10, failureThreshold: 180 },
    readinessProbe: { httpGet: { path: '/health', port: engine.port }, periodSeconds: 5 },
    // The kubelet signals every container at once; the engine stays up while the agent drains.
    lifecycle: { preStop: { exec: { command: ['sh', '-c', `sleep ${AGENT_DRAIN_SECONDS + 5}`] } } },
  };
  const agentEnv: V1EnvVar[] = [
    { name: 'WORKER_CONTROL_PLANE', value: config.controlPlaneGrpcAddress },
    { name: 'WORKER_JOIN_TOKEN', valueFrom: { secretKeyRef: { name: input.secret.name, key: input.replicaId } } },
    { name: 'WORKER_AGENT_ID', value: `agt_k8s_${input.replicaId.replace(/^rep_/, '')}` },
    { name: 'WORKER_ENGINE', value: 'openai' },
    { name: 'WORKER_ENGINE_URL', value: `http://127.0.0.1:${engine.port}/v1` },
    { name: 'WORKER_MAX_CONCURRENCY', value: String(input.agent.maxConcurrency) },
    { name: 'WORKER_DRAIN_TIMEOUT_MS', value: String(AGENT_DRAIN_SECONDS * 1000) },
    // The engine is ours to start: one tiny completion before the replica takes work, timed as its warm-up.
    { name: 'WORKER_ENGINE_WARM_UP', value: 'on' },
    ...(input.agent.priorityScheduling ? [{ name: 'WORKER_ENGINE_PRIORITY_SCHEDULING', value: 'true' }] : []),
    // The agent reads the engine's hub cache there, so its Hello names the models the volume holds.
    ...(cacheDir ? [{ name: 'WORKER_MODEL_CACHE_DIR', value: cacheDir }] : []),
    ...Object.entries(input.agent.lora ? loraAgentEnv(input.agent.lora) : {}).map(([name, value]) => ({ name, value })),
    ...Object.entries(config.agentEnv).map(([name, value]) => ({ name, value })),
  ];
  const agentContainer: V1Container = {
    // The engine's image runs our binary: nothing of ours to pull, only the file the init container fetched.
    name: 'agent', image: engine.image, command: [AGENT_BINARY], env: agentEnv, terminationMessagePolicy: 'FallbackToLogsOnError',
    volumeMounts: [
      { name: 'agent-bin', mountPath: AGENT_DIR, readOnly: true },
      ...(cacheDir ? [{ name: 'model-cache', mountPath: cacheDir, readOnly: true }] : []),
    ],
  };
  const fetchAgent: V1Container = {
    name: 'fetch-agent', image: config.fetchImage, terminationMessagePolicy: 'FallbackToLogsOnError',
    command: ['sh', '-c', 'curl -fsSL --retry 5 -o "$AGENT_FILE" "$AGENT_URL" && echo "$AGENT_SHA256  $AGENT_FILE" | sha256sum -c - && chmod 0755 "$AGENT_FILE"'],
    env: [{ name: 'AGENT_URL', value: input.agent.url }, { name: 'AGENT_SHA256', value: input.agent.sha256 }, { name: 'AGENT_FILE', value: AGENT_BINARY }],
    volumeMounts: [{ name: 'agent-bin', mountPath: AGENT_DIR }],
  };
  return {
    apiVersion: 'v1', kind: 'Pod',
    metadata: {
      name: podName(config, input.replicaId), namespace: config.namespace,
      labels: {
        [LABELS.managedBy]: MANAGED_BY, [LABELS.deploymentId]: input.deploymentId, [LABELS.replicaId]: input.replicaId,
        [LABELS.model]: modelLabelValue(input.modelId),
      },
      // No blockOwnerDeletion: the Secret is deleted with Background propagation, and on clusters
      // enforcing owner references it would need update on secrets/finalizers.
      ownerReferences: [{ apiVersion: 'v1', kind: 'Secret', name: input.secret.name, uid: input.secret.uid }],
    },
    spec: {
      restartPolicy: 'Always',
      // Engine images run model code: no credentials of the namespace's service account in the pod.
      automountServiceAccountToken: false,
      terminationGracePeriodSeconds: config.terminationGracePeriodSeconds,
      nodeSelector: { ...gpuClass.nodeSelector, [config.gpuProductLabel]: gpuClass.product },
      ...(config.modelCache ? { affinity: cacheAffinity(input.modelId, input.cachedNodes ?? []) } : {}),
      tolerations: gpuClass.tolerations,
      volumes,
      initContainers: [fetchAgent],
      containers: [engineContainer, agentContainer],
    },
  };
}

/**
 * Where the model's weights should already be: nodes the operator labelled as holding them
 * (weight 100), then nodes a pod of the model ran on (weight 50; a host-path cache kept what it
 * downloaded). Preferred, never required: a pod goes wherever GPUs are free, downloading if it must.
 */
function cacheAffinity(modelId: string, cachedNodes: readonly string[]): V1Affinity {
  return {
    nodeAffinity: {
      preferredDuringSchedulingIgnoredDuringExecution: [
        { weight: 100, preference: { matchExpressions: [{ key: modelCacheNodeLabel(modelId), operator: 'Exists' }] } },
        ...(cachedNodes.length > 0 ? [{ weight: 50, preference: { matchFields: [{ key: 'metadata.name', operator: 'In', values: [...cachedNodes].sort() }] } }] : []),
      ],
    },
  };
}
