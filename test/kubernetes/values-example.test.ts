/**
 * deploy/kubernetes/values.example.yaml is what operators copy: it must load as the provider's
 * configuration, and name every key the configuration has (the docs call it the example with
 * every key), so a key with a default added to kubernetes-config.ts without its example fails here.
 */
import fs from 'node:fs';
import path from 'node:path';
import { parseKubernetesConfig } from '../../control-plane/providers/kubernetes/kubernetes-config';

const FILE = path.join(__dirname, '../../deploy/kubernetes/values.example.yaml');

describe('deploy/kubernetes/values.example.yaml', () => {
  const text = fs.readFileSync(FILE, 'utf8');

  it('loads as the provider configuration, with the values it shows', () => {
    const config = parseKubernetesConfig(text, FILE);
    expect(config).toMatchObject({
      namespace: 'inference',
      kubeconfig: 'in-cluster',
      controlPlaneGrpcAddress: 'inference-control-plane.inference.svc:50051',
      controlPlaneHttpUrl: 'http://inference-control-plane.inference.svc:8080',
      modelCache: { persistentVolumeClaim: 'hf-cache', mountPath: '/root/.cache/huggingface' },
    });
    expect(config.gpuClasses.map((gpuClass) => [gpuClass.product, gpuClass.gpuMemoryGb, gpuClass.pricePerGpuHour, gpuClass.tolerations.length]))
      .toEqual([['NVIDIA-H100-80GB-HBM3', 80, 2.49, 1], ['NVIDIA-L4', 24, 0.8, 0]]);
  });

  it('names every key of the configuration (the optional ones at least in a comment)', () => {
    const config = parseKubernetesConfig(text, FILE);
    const uncommented = text.replace(/^\s*#\s?/gm, '');
    const keys = [...Object.keys(config), 'engineCommand', 'huggingFaceTokenSecret', ...Object.keys(config.gpuClasses[0])];
    for (const key of keys) expect([key, new RegExp(`(^|[\\s{,])${key}:`, 'm').test(uncommented)]).toEqual([key, true]);
  });
});
