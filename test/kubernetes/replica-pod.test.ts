/**
 * The manifests the Kubernetes provider writes, checked against the real Kubernetes schemas
 * (kubernetes-models), and the parts of them a cluster acts on: GPUs, node selection, the
 * agent's download and its join token from the deployment's Secret, ownership for clean-up.
 */
import { Pod } from 'kubernetes-models/v1/Pod';
import { Secret } from 'kubernetes-models/v1/Secret';
import type { CatalogModel } from '../../control-plane/catalog/catalog';
import { engineContainerFor } from '../../control-plane/providers/kubernetes/engine-container';
import { parseKubernetesConfig } from '../../control-plane/providers/kubernetes/kubernetes-config';
import { Catalog } from '../../control-plane/catalog/catalog';
import { deploymentSecret, modelCacheNodeLabel, modelLabelValue, replicaPod } from '../../control-plane/providers/kubernetes/replica-pod';

const config = parseKubernetesConfig(`
namespace: inference
kubeconfig: /tmp/kubeconfig
controlPlaneGrpcAddress: cp.inference.svc:50051
controlPlaneHttpUrl: http://cp.inference.svc:8080
modelCache: { persistentVolumeClaim: hf-cache }
huggingFaceTokenSecret: hf
gpuClasses:
  - product: NVIDIA-H100-80GB-HBM3
    gpuMemoryGb: 80
    pricePerGpuHour: 2.49
    tolerations: [{ key: nvidia.com/gpu, operator: Exists, effect: NoSchedule }]
`);

const model = (overrides: Partial<CatalogModel> = {}): CatalogModel => ({
  id: 'meta-llama/Llama-3.1-70B-Instruct', name: 'Llama', modality: 'text', task: 'chat', engine: 'vllm', official: true, gpuMemoryGb: 140,
  inputModalities: ['text'], sizes: [], targetConcurrency: 32, ...overrides,
} as CatalogModel);

function pod(priorityScheduling = false, engineModel = model(), podConfig = config, cachedNodes: string[] = []) {
  const engine = engineContainerFor(engineModel, 2, priorityScheduling, podConfig.engineImages)!;
  return replicaPod(podConfig, {
    deploymentId: 'dep_Abc123', replicaId: 'rep_9f8e', modelId: engineModel.id, cachedNodes,
    secret: { name: 'inference-dep-abc123', uid: '0b6f2d1e-1111-4222-8333-944455556666' }, engine, gpus: 2,
    gpuClass: config.gpuClasses[0], agent: { url: 'http://cp.inference.svc:8080/agent/0.1.0/worker-agent-linux-x64', sha256: 'a'.repeat(64), maxConcurrency: 32, priorityScheduling },
  });
}

describe('Kubernetes manifests', () => {
  test('the replica pod is a valid Pod: GPUs, node class, /dev/shm, model cache, agent fetched and checked, token from the Secret, owned by it', () => {
    const manifest = pod();
    expect(() => new Pod(manifest as never).validate()).not.toThrow();
    const spec = manifest.spec!;
    const [engine, agent] = spec.containers;
    expect(engine.resources).toEqual({ limits: { 'nvidia.com/gpu': '2' }, requests: { 'nvidia.com/gpu': '2' } });
    expect(engine.image).toBe('vllm/vllm-openai:v0.11.0');
    expect(engine.args).toEqual(['--model', 'meta-llama/Llama-3.1-70B-Instruct', '--served-model-name', 'meta-llama/Llama-3.1-70B-Instruct', '--tensor-parallel-size', '2', '--port', '8000']);
    expect(engine.volumeMounts).toEqual([{ name: 'dshm', mountPath: '/dev/shm' }, { name: 'model-cache', mountPath: '/root/.cache/huggingface' }]);
    // Hugging Face downloads go to the cache volume whatever user the image runs as.
    expect(engine.env).toEqual([{ name: 'HF_TOKEN', valueFrom: { secretKeyRef: { name: 'hf', key: 'HF_TOKEN' } } }, { name: 'HF_HOME', value: '/root/.cache/huggingface' }]);
    expect(spec.volumes).toContainEqual({ name: 'dshm', emptyDir: { medium: 'Memory', sizeLimit: '16Gi' } });
    expect(spec.volumes).toContainEqual({ name: 'model-cache', persistentVolumeClaim: { claimName: 'hf-cache' } });
    expect(spec.automountServiceAccountToken).toBe(false);
    expect(spec.nodeSelector).toEqual({ 'nvidia.com/gpu.product': 'NVIDIA-H100-80GB-HBM3' });
    expect(spec.tolerations).toEqual([{ key: 'nvidia.com/gpu', operator: 'Exists', effect: 'NoSchedule' }]);
    // The grace period outlives the agent's drain, and the engine outlives it too (preStop).
    expect(spec.terminationGracePeriodSeconds).toBeGreaterThan(35);
    expect(engine.lifecycle?.preStop?.exec?.command?.join(' ')).toContain('sleep 35');
    // The agent runs in the engine's image from the shared volume, with its token from the Secret.
    expect(agent).toMatchObject({ name: 'agent', image: engine.image, command: ['/agent/worker-agent'] });
    const env = Object.fromEntries(agent.env!.map((variable) => [variable.name, variable.value ?? variable.valueFrom]));
    expect(env).toMatchObject({
      WORKER_CONTROL_PLANE: 'cp.inference.svc:50051', WORKER_ENGINE: 'openai', WORKER_ENGINE_URL: 'http://127.0.0.1:8000/v1', WORKER_MAX_CONCURRENCY: '32',
      WORKER_JOIN_TOKEN: { secretKeyRef: { name: 'inference-dep-abc123', key: 'rep_9f8e' } },
      // The engine is ours to start: it is warmed up before the replica takes work; the agent reads the cache the engine fills.
      WORKER_ENGINE_WARM_UP: 'on', WORKER_MODEL_CACHE_DIR: '/root/.cache/huggingface',
    });
    expect(agent.volumeMounts).toEqual([{ name: 'agent-bin', mountPath: '/agent', readOnly: true }, { name: 'model-cache', mountPath: '/root/.cache/huggingface', readOnly: true }]);
    expect(JSON.stringify(manifest)).not.toContain('jt-');
    const [fetch] = spec.initContainers!;
    expect(fetch.env).toEqual(expect.arrayContaining([{ name: 'AGENT_SHA256', value: 'a'.repeat(64) }, { name: 'AGENT_URL', value: 'http://cp.inference.svc:8080/agent/0.1.0/worker-agent-linux-x64' }]));
    expect(fetch.command!.join(' ')).toContain('sha256sum -c');
    expect(manifest.metadata).toMatchObject({
      name: 'inference-rep-9f8e', namespace: 'inference',
      labels: {
        'app.kubernetes.io/managed-by': 'inference-platform', 'inference-platform/deployment-id': 'dep_Abc123', 'inference-platform/replica-id': 'rep_9f8e',
        'inference-platform/model': 'meta-llama.Llama-3.1-70B-Instruct',
      },
      ownerReferences: [{ apiVersion: 'v1', kind: 'Secret', name: 'inference-dep-abc123', uid: '0b6f2d1e-1111-4222-8333-944455556666' }],
    });
  });

  test('a sharing replica runs priority scheduling on the engine and tells the agent', () => {
    const manifest = pod(true);
    expect(manifest.spec!.containers[0].args).toEqual(expect.arrayContaining(['--scheduling-policy', 'priority']));
    expect(manifest.spec!.containers[1].env).toContainEqual({ name: 'WORKER_ENGINE_PRIORITY_SCHEDULING', value: 'true' });
    const sglang = pod(true, model({ engine: 'sglang', task: 'embedding' }));
    expect(() => new Pod(sglang as never).validate()).not.toThrow();
    expect(sglang.spec!.containers[0].command).toEqual(['python3', '-m', 'sglang.launch_server']);
    expect(sglang.spec!.containers[0].args).toEqual(expect.arrayContaining(['--tp', '2', '--is-embedding', '--enable-priority-scheduling', '--schedule-low-priority-values-first']));
  });

  test('with a model cache, the pod prefers nodes labelled as holding the model, then nodes its pods ran on; never required', () => {
    const hostPathConfig = { ...config, modelCache: { hostPath: '/var/lib/model-cache', mountPath: '/models' } };
    const manifest = pod(false, model(), hostPathConfig, ['gpu-b', 'gpu-a']);
    expect(() => new Pod(manifest as never).validate()).not.toThrow();
    expect(manifest.spec!.affinity).toEqual({
      nodeAffinity: {
        preferredDuringSchedulingIgnoredDuringExecution: [
          { weight: 100, preference: { matchExpressions: [{ key: 'models.inference-platform/meta-llama.Llama-3.1-70B-Instruct', operator: 'Exists' }] } },
          { weight: 50, preference: { matchFields: [{ key: 'metadata.name', operator: 'In', values: ['gpu-a', 'gpu-b'] }] } },
        ],
      },
    });
    expect(manifest.spec!.volumes).toContainEqual({ name: 'model-cache', hostPath: { path: '/var/lib/model-cache', type: 'DirectoryOrCreate' } });
    expect(manifest.spec!.containers[0].env).toContainEqual({ name: 'HF_HOME', value: '/models' });
    // No remembered node: only the operator's label is preferred.
    expect(pod(false, model(), hostPathConfig).spec!.affinity!.nodeAffinity!.preferredDuringSchedulingIgnoredDuringExecution).toHaveLength(1);
    // No cache volume: nothing to prefer, no cache directory, no HF_HOME.
    const bare = pod(false, model(), { ...config, modelCache: undefined });
    expect(bare.spec!.affinity).toBeUndefined();
    expect(bare.spec!.containers[0].env!.map((variable) => variable.name)).not.toContain('HF_HOME');
    expect(bare.spec!.containers[1].env!.map((variable) => variable.name)).not.toContain('WORKER_MODEL_CACHE_DIR');
  });

  test('model ids as label names and values: readable when they fit, hashed when too long, never two ids on one', () => {
    expect(modelLabelValue('meta-llama/Llama-3.1-8B-Instruct')).toBe('meta-llama.Llama-3.1-8B-Instruct');
    expect(modelCacheNodeLabel('BAAI/bge-large-en-v1.5')).toBe('models.inference-platform/BAAI.bge-large-en-v1.5');
    expect(modelLabelValue('local/my model (q4)')).toBe('local.my-model--q4');
    const long = `org/${'x'.repeat(80)}`;
    const other = `org/${'x'.repeat(79)}y`;
    expect(modelLabelValue(long)).toMatch(/^[A-Za-z0-9][A-Za-z0-9._-]{0,61}[A-Za-z0-9]$/);
    expect(modelLabelValue(long)).not.toBe(modelLabelValue(other));
    for (const id of ['meta-llama/Llama-3.1-8B-Instruct', long, '/weird/', '日本語/モデル']) expect(modelLabelValue(id)).toMatch(/^[A-Za-z0-9]([A-Za-z0-9._-]{0,61}[A-Za-z0-9])?$/);
  });

  test('vLLM gets --load-format only where the catalog names one; the catalog refuses it for other engines, naming the field', () => {
    expect(pod(false, model({ loadFormat: 'runai_streamer' })).spec!.containers[0].args).toEqual(expect.arrayContaining(['--load-format', 'runai_streamer']));
    expect(pod(false, model()).spec!.containers[0].args).not.toContain('--load-format');
    const catalog = new Catalog([]);
    expect(catalog.register({ ...model(), loadFormat: 'fastsafetensors' }).loadFormat).toBe('fastsafetensors');
    expect(() => catalog.register({ ...model(), engine: 'sglang', loadFormat: 'safetensors' })).toThrow('invalid catalog model: loadFormat: only vllm models take a loadFormat');
    expect(() => catalog.register({ ...model(), loadFormat: 'pickle' })).toThrow(/invalid catalog model: loadFormat: /);
  });

  test('a catalog container wins; an engine with neither has none', () => {
    const custom = engineContainerFor(model({ engine: 'diffusers', container: { image: 'ghcr.io/acme/sdxl:1', args: ['--model', '{model}', '--gpus', '{gpus}'] } }), 4, false, {});
    expect(custom).toEqual({ image: 'ghcr.io/acme/sdxl:1', args: ['--model', 'meta-llama/Llama-3.1-70B-Instruct', '--gpus', '4'], port: 8000 });
    expect(engineContainerFor(model({ engine: 'diffusers' }), 1, false, {})).toBeNull();
  });

  test('the deployment Secret is a valid Secret holding one token per replica', () => {
    const secret = deploymentSecret(config, 'dep_Abc123', { rep_1: 'jt-one', rep_2: 'jt-two' }, '42');
    expect(() => new Secret(secret as never).validate()).not.toThrow();
    expect(secret).toMatchObject({ metadata: { name: 'inference-dep-abc123', namespace: 'inference', resourceVersion: '42' }, stringData: { rep_1: 'jt-one', rep_2: 'jt-two' } });
  });

  test('a bad configuration is refused naming the key', () => {
    expect(() => parseKubernetesConfig('namespace: Bad_Name\ncontrolPlaneGrpcAddress: a:1\ncontrolPlaneHttpUrl: http://a\ngpuClasses: [{product: x, gpuMemoryGb: 1, pricePerGpuHour: 1}]')).toThrow(/namespace: must be a DNS-1123 label/);
    expect(() => parseKubernetesConfig('namespace: ok\ncontrolPlaneGrpcAddress: a:1\ncontrolPlaneHttpUrl: http://a\ngpuClasses: []')).toThrow(/gpuClasses/);
    expect(() => parseKubernetesConfig('namespace: ok\ncontrolPlaneGrpcAddress: a:1\ncontrolPlaneHttpUrl: http://a\ngpuClasses: [{product: x, gpuMemoryGb: 1, pricePerGpuHour: 1}]\nextra: 1')).toThrow(/extra|Unrecognized/i);
    expect(() => parseKubernetesConfig(': : :')).toThrow(/not valid YAML|namespace/);
  });
});
