/**
 * The chart deploy/helm/inference-platform as its tests see it: a values file that turns every
 * option on, the rendered server container, and its environment resolved as the kubelet would
 * (Secrets, the downward API, `$(VAR)` references).
 */
import path from 'node:path';
import type { RenderedManifest } from './helm-template';

export const CHART_DIR = path.resolve(__dirname, '../../deploy/helm/inference-platform');

/** Every option of values.yaml on (or set), each way it can be given. */
export const ALL_ON_VALUES = {
  replicaCount: 3,
  image: { repository: 'registry.example.com/inference/server', tag: '0.1.0', pullPolicy: 'Always' },
  imagePullSecrets: [{ name: 'registry' }],
  publicUrl: 'https://inference.example.com',
  logLevel: 'warn',
  localAgents: false,
  database: { url: 'postgres://inference:secret@postgres.db:5432/inference' },
  redis: { existingSecret: 'redis-credentials', existingSecretKey: 'url' },
  storage: {
    provider: 's3', bucket: 'outputs',
    s3: { endpoint: 'http://minio.storage:9000', region: 'eu-west-1', forcePathStyle: true, keyPrefix: 'prod/', accessKeyId: 'AKIA-test', secretAccessKey: 'secret-test' },
  },
  secrets: {
    existingSecret: 'platform-keys',
    values: {
      SECRETS_ENCRYPTION_KEY: '0'.repeat(64), STORAGE_SIGNING_KEY: '1'.repeat(64), OPERATOR_TOKEN: 'an-operator-token-of-24-chars',
    },
  },
  env: { REQUEST_TIMEOUT_MS: '90000', CAPACITY_INTERVAL_MS: '5000' },
  kubernetes: {
    enabled: true, namespace: 'gpu-replicas',
    config: {
      gpuClasses: [{ product: 'NVIDIA-L4', gpuMemoryGb: 24, pricePerGpuHour: 0.8, tolerations: [{ key: 'nvidia.com/gpu', operator: 'Exists', effect: 'NoSchedule' }] }],
      fetchImage: 'curlimages/curl:8.11.1', terminationGracePeriodSeconds: 120,
    },
  },
  serviceAccount: { annotations: { 'iam.example.com/role': 'inference' } },
  dataVolume: { persistentVolumeClaim: { claimName: 'inference-data' } },
  resources: { requests: { cpu: '1', memory: '2Gi' }, limits: { cpu: '4', memory: '4Gi' } },
  podDisruptionBudget: { enabled: true, maxUnavailable: 1 },
  podAnnotations: { 'prometheus.io/scrape': 'true' },
  nodeSelector: { 'kubernetes.io/os': 'linux' },
  tolerations: [{ key: 'dedicated', operator: 'Equal', value: 'inference', effect: 'NoSchedule' }],
  affinity: { podAntiAffinity: { preferredDuringSchedulingIgnoredDuringExecution: [{ weight: 100, podAffinityTerm: { topologyKey: 'kubernetes.io/hostname', labelSelector: { matchLabels: { 'app.kubernetes.io/component': 'server' } } } }] } },
};

/** The Secrets ALL_ON_VALUES names that the operator makes (the chart only refers to them). */
export const EXISTING_SECRETS: Record<string, Record<string, string>> = {
  'redis-credentials': { url: 'redis://redis:6379' },
  'platform-keys': { METRICS_TOKEN: 'a-metrics-token-of-16+' },
};

/** The server container of the rendered Deployment. */
export function serverContainer(manifests: RenderedManifest[]): Record<string, any> {
  const deployment = manifests.find(({ object }) => object.kind === 'Deployment')!.object;
  return deployment.spec.template.spec.containers.find((container: { name: string }) => container.name === 'server');
}

/**
 * The container's environment as the kubelet makes it: envFrom Secrets first, then env in order
 * (`$(NAME)` of an earlier variable expanded), secretKeyRef from the chart's own Secrets or
 * `secrets` (Secrets the operator made, by name), the downward API from `fields` (by variable).
 */
export function containerEnv(
  manifests: RenderedManifest[], fields: Record<string, string>, secrets: Record<string, Record<string, string>> = EXISTING_SECRETS,
): Record<string, string> {
  const container = serverContainer(manifests);
  const secretData = (name: string): Record<string, string> => {
    const own = manifests.find(({ object }) => object.kind === 'Secret' && object.metadata.name === name);
    const data = own ? own.object.stringData : secrets[name];
    if (!data) throw new Error(`no Secret ${name}`);
    return data;
  };
  const env: Record<string, string> = {};
  for (const source of container.envFrom ?? []) Object.assign(env, secretData(source.secretRef.name));
  for (const entry of container.env as { name: string; value?: string; valueFrom?: Record<string, any> }[]) {
    if (entry.valueFrom?.secretKeyRef) {
      const { name, key } = entry.valueFrom.secretKeyRef;
      const value = secretData(name)[key];
      if (value === undefined) throw new Error(`Secret ${name} has no key ${key}`);
      env[entry.name] = value;
    } else if (entry.valueFrom?.fieldRef) {
      if (!(entry.name in fields)) throw new Error(`no value given for ${entry.name} (${entry.valueFrom.fieldRef.fieldPath})`);
      env[entry.name] = fields[entry.name];
    } else {
      env[entry.name] = (entry.value ?? '').replace(/\$\((\w+)\)/g, (whole, name: string) => env[name] ?? whole);
    }
  }
  return env;
}
