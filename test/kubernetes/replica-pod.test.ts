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
import { deploymentSecret, replicaPod } from '../../control-plane/providers/kubernetes/replica-pod';

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

function pod(priorityScheduling = false, engineModel = model()) {
  const engine = engineContainerFor(engineModel, 2, priorityScheduling, config.engineImages)!;
  return replicaPod(config, {
    deploymentId: 'dep_Abc123', replicaId: 'rep_9f8e', secret: { name: 'inference-dep-abc123', uid: '0b6f2d1e-1111-4222-8333-944455556666' }, engine, gpus: 2,
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
    expect(engine.env).toEqual([{ name: 'HF_TOKEN', valueFrom: { secretKeyRef: { name: 'hf', key: 'HF_TOKEN' } } }]);
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
    });
    expect(JSON.stringify(manifest)).not.toContain('jt-');
    const [fetch] = spec.initContainers!;
    expect(fetch.env).toEqual(expect.arrayContaining([{ name: 'AGENT_SHA256', value: 'a'.repeat(64) }, { name: 'AGENT_URL', value: 'http://cp.inference.svc:8080/agent/0.1.0/worker-agent-linux-x64' }]));
    expect(fetch.command!.join(' ')).toContain('sha256sum -c');
    expect(manifest.metadata).toMatchObject({
      name: 'inference-rep-9f8e', namespace: 'inference',
      labels: { 'app.kubernetes.io/managed-by': 'inference-platform', 'inference-platform/deployment-id': 'dep_Abc123', 'inference-platform/replica-id': 'rep_9f8e' },
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
