/**
 * The Kubernetes provider's settings: one YAML (or JSON) file an operator writes
 * (`KUBERNETES_CONFIG_FILE`, example in deploy/kubernetes/values.example.yaml). Checked whole at
 * start-up: a typo stops the server with the key named, instead of pods that never schedule.
 */
import fs from 'node:fs';
import { loadYaml } from '@kubernetes/client-node';
import { z } from 'zod';

const toleration = z.object({
  key: z.string().optional(),
  operator: z.enum(['Exists', 'Equal']).optional(),
  value: z.string().optional(),
  effect: z.enum(['NoSchedule', 'PreferNoSchedule', 'NoExecute']).optional(),
}).strict();

const gpuClass = z.object({
  /** The node label's value (GPU feature discovery's `nvidia.com/gpu.product`), e.g. `NVIDIA-H100-80GB-HBM3`. */
  product: z.string().min(1),
  /** Memory of one GPU of the class; a replica that needs more takes several (tensor parallel). */
  gpuMemoryGb: z.number().positive(),
  /** What one GPU of the class costs per hour: the price cap compares replicas by it. */
  pricePerGpuHour: z.number().nonnegative(),
  tolerations: z.array(toleration).default([]),
  /** More node labels pods of this class must match (beyond the product label). */
  nodeSelector: z.record(z.string(), z.string()).default({}),
}).strict();

/** A DNS-1123 label: what a namespace (and our name prefix) must be. */
const dnsLabel = z.string().regex(/^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/, 'must be a DNS-1123 label (lowercase letters, digits and -, at most 63)');

const shape = z.object({
  namespace: dnsLabel,
  /** `in-cluster` (the pod's service account), or the path of a kubeconfig file. */
  kubeconfig: z.string().min(1).default('in-cluster'),
  /** host:port the agents in the pods dial (the control plane's gRPC port, as a Service). */
  controlPlaneGrpcAddress: z.string().regex(/^\S+:\d+$/, 'must be host:port'),
  /** Base URL the init container downloads the agent from (the gateway's HTTP port). */
  controlPlaneHttpUrl: z.string().url(),
  gpuProductLabel: z.string().min(1).default('nvidia.com/gpu.product'),
  gpuResource: z.string().min(1).default('nvidia.com/gpu'),
  /** Image of the init container that fetches the agent: needs `sh`, `curl` and `sha256sum`. */
  fetchImage: z.string().min(1).default('curlimages/curl:8.11.1'),
  /** The agent binary's architecture on the GPU nodes. */
  agentArch: z.enum(['x64', 'arm64']).default('x64'),
  /** Size limit of the memory-backed /dev/shm (NCCL and PyTorch need more than Docker's 64 MB). */
  shmSize: z.string().regex(/^\d+(Ki|Mi|Gi|Ti)?$/, 'must be a quantity such as 16Gi').default('16Gi'),
  /** A volume for model weights that outlives pods: a PVC, or a host path on every GPU node. */
  modelCache: z.object({
    persistentVolumeClaim: z.string().min(1).optional(),
    hostPath: z.string().startsWith('/').optional(),
    mountPath: z.string().startsWith('/').default('/root/.cache/huggingface'),
  }).strict().refine((cache) => Boolean(cache.persistentVolumeClaim) !== Boolean(cache.hostPath), 'give exactly one of persistentVolumeClaim and hostPath').optional(),
  /** Must exceed the agent's drain (WORKER_DRAIN_TIMEOUT_MS, 30 s by default): deletion waits this long before SIGKILL. */
  terminationGracePeriodSeconds: z.number().int().min(1).default(120),
  /** Engine images by catalog engine kind; a catalog entry's own `container.image` wins. */
  engineImages: z.record(z.string(), z.string().min(1)).default({}),
  /**
   * Replaces the engine container's command in every pod (its arguments stay, after it). For
   * clusters without GPUs (docs/kubernetes.md): e.g. `[sh, -c, exec sleep infinity, --]` with
   * `agentEnv: { WORKER_ENGINE: cpu }`, the agent's CPU stand-in answering instead.
   */
  engineCommand: z.array(z.string().min(1)).min(1).optional(),
  /** Secret holding `HF_TOKEN` for gated models (its key `HF_TOKEN` goes to the engine). */
  huggingFaceTokenSecret: z.string().min(1).optional(),
  /** Extra environment for every agent (e.g. WORKER_LOG_LEVEL). */
  agentEnv: z.record(z.string(), z.string()).default({}),
  /** Prefix of the names of the pods and secrets the provider writes. */
  namePrefix: dnsLabel.default('inference'),
  /** How long `terminate` waits for a deleted pod to be gone before it returns (Kubernetes finishes the rest). */
  terminateWaitSeconds: z.number().min(0).default(30),
  /** After a pod of a deployment failed (image pull, crash loop), the next is placed after this, doubling up to 5 min. */
  failureBackoffSeconds: z.number().min(0).default(10),
  /** The pod watch is restarted after this when it breaks. */
  watchRestartSeconds: z.number().min(0).default(2),
  gpuClasses: z.array(gpuClass).min(1),
}).strict();

export type KubernetesConfig = z.infer<typeof shape>;
export type GpuClass = z.infer<typeof gpuClass>;
export type Toleration = z.infer<typeof toleration>;

/** Parses the provider's file (YAML or JSON); throws naming the first bad key. */
export function parseKubernetesConfig(text: string, source = 'the Kubernetes provider configuration'): KubernetesConfig {
  let raw: unknown;
  try {
    raw = loadYaml<unknown>(text);
  } catch (error) {
    throw new Error(`${source} is not valid YAML: ${(error as Error).message.split('\n')[0]}`);
  }
  const parsed = shape.safeParse(raw ?? {});
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new Error(`${source}: ${issue.path.join('.') || '(top level)'}: ${issue.message}`);
  }
  return parsed.data;
}

export function loadKubernetesConfig(file: string): KubernetesConfig {
  return parseKubernetesConfig(fs.readFileSync(file, 'utf8'), file);
}
