/**
 * Offers from a cluster's nodes (free GPUs per configured class, as 1/2/4/8-GPU replicas on one
 * node, at the class's price) and what a pod's status means for its replica.
 */
import { ApiException, type V1Node, type V1Pod } from '@kubernetes/client-node';
import { apiFailure } from '../../control-plane/providers/kubernetes/kubernetes-provider';
import { gpuOffers, parseOfferId } from '../../control-plane/providers/kubernetes/gpu-offers';
import { parseKubernetesConfig } from '../../control-plane/providers/kubernetes/kubernetes-config';
import { podCondition } from '../../control-plane/providers/kubernetes/pod-condition';

const config = parseKubernetesConfig(`
namespace: inference
controlPlaneGrpcAddress: cp:50051
controlPlaneHttpUrl: http://cp:8080
gpuClasses:
  - { product: NVIDIA-H100-80GB-HBM3, gpuMemoryGb: 80, pricePerGpuHour: 2.5 }
  - { product: NVIDIA-L4, gpuMemoryGb: 24, pricePerGpuHour: 0.8 }
`);

const node = (name: string, product: string, gpus: number, extra: Partial<V1Node['spec']> = {}): V1Node => ({
  metadata: { name, labels: { 'nvidia.com/gpu.product': product } }, spec: { ...extra },
  status: { allocatable: { 'nvidia.com/gpu': String(gpus) }, conditions: [{ type: 'Ready', status: 'True' }] },
});
const pod = (nodeName: string, gpus: number, phase = 'Running'): V1Pod => ({
  metadata: { name: `p-${nodeName}-${gpus}` }, spec: { nodeName, containers: [{ name: 'c', resources: { limits: { 'nvidia.com/gpu': String(gpus) } } }] }, status: { phase },
});

describe('Kubernetes offers', () => {
  test('free GPUs by class and size, minus what pods on each node hold; finished pods hold nothing', () => {
    const nodes = [node('h1', 'NVIDIA-H100-80GB-HBM3', 8), node('h2', 'NVIDIA-H100-80GB-HBM3', 8), node('l1', 'NVIDIA-L4', 4), node('other', 'NVIDIA-A10G', 4)];
    const pods = [pod('h1', 5), pod('h2', 1), pod('h2', 4, 'Succeeded'), pod('l1', 4)];
    const offers = gpuOffers(config, nodes, pods);
    // h1 has 3 free, h2 has 7: 10 single GPUs, 1 + 3 pairs, 0 + 1 quads, no 8.
    expect(offers.map((offer) => [offer.id, offer.available, offer.gpuMemoryGb, offer.pricePerHour])).toEqual([
      ['kubernetes:NVIDIA-H100-80GB-HBM3:x1', 10, 80, 2.5],
      ['kubernetes:NVIDIA-H100-80GB-HBM3:x2', 4, 160, 5],
      ['kubernetes:NVIDIA-H100-80GB-HBM3:x4', 1, 320, 10],
    ]);
    expect(offers[1]).toMatchObject({ provider: 'kubernetes', gpuName: '2× NVIDIA-H100-80GB-HBM3', region: 'inference' });
    expect(parseOfferId(config, offers[1].id)).toEqual({ gpuClass: config.gpuClasses[0], gpus: 2 });
    expect(parseOfferId(config, 'kubernetes:NVIDIA-A10G:x1')).toBeNull();
  });

  test('cordoned and not-ready nodes offer nothing', () => {
    const cordoned = node('h1', 'NVIDIA-H100-80GB-HBM3', 8, { unschedulable: true });
    const notReady = node('h2', 'NVIDIA-H100-80GB-HBM3', 8);
    notReady.status!.conditions = [{ type: 'Ready', status: 'False' }];
    expect(gpuOffers(config, [cordoned, notReady], [])).toEqual([]);
  });
});

describe('what a pod says about its replica', () => {
  test('unschedulable: waiting for GPU capacity, in the scheduler\'s words', () => {
    expect(podCondition({ status: { phase: 'Pending', conditions: [{ type: 'PodScheduled', status: 'False', reason: 'Unschedulable', message: '0/4 nodes are available: 4 Insufficient nvidia.com/gpu.' }] } }))
      .toEqual({ kind: 'waiting', reason: 'waiting for GPU capacity: 0/4 nodes are available: 4 Insufficient nvidia.com/gpu.' });
  });

  test('an image that cannot be pulled and a crash loop fail it with the container\'s message', () => {
    expect(podCondition({ status: { phase: 'Pending', containerStatuses: [{ name: 'engine', image: 'vllm/nope:1', imageID: '', ready: false, restartCount: 0, state: { waiting: { reason: 'ErrImagePull', message: 'not found' } } }] } }))
      .toEqual({ kind: 'failed', reason: 'container engine image vllm/nope:1 cannot be pulled (ErrImagePull): not found' });
    expect(podCondition({ status: { phase: 'Running', containerStatuses: [{ name: 'agent', image: 'x', imageID: '', ready: false, restartCount: 3, state: { waiting: { reason: 'CrashLoopBackOff', message: 'back-off' } }, lastState: { terminated: { exitCode: 2, reason: 'Error', message: 'bad join token' } } }] } }))
      .toEqual({ kind: 'failed', reason: 'container agent is crash-looping: exit code 2 (Error): bad join token' });
    expect(podCondition({ status: { phase: 'Pending', initContainerStatuses: [{ name: 'fetch-agent', image: 'curl', imageID: '', ready: false, restartCount: 2, state: { waiting: { reason: 'CrashLoopBackOff' } }, lastState: { terminated: { exitCode: 1, message: 'sha256sum: WARNING: 1 computed checksum did NOT match' } } }] } }))
      .toMatchObject({ kind: 'failed', reason: expect.stringContaining('init container fetch-agent is crash-looping: exit code 1: sha256sum') });
  });

  test('running says nothing; a failed pod says why', () => {
    expect(podCondition({ status: { phase: 'Running', containerStatuses: [] } })).toEqual({ kind: 'running' });
    expect(podCondition({ status: { phase: 'Failed', reason: 'Evicted', message: 'The node was low on resource: memory.' } }))
      .toEqual({ kind: 'failed', reason: 'the pod failed (Evicted): The node was low on resource: memory.' });
  });
});

describe('a refused Kubernetes API call, as a replica shows it', () => {
  test('the Status message and code only: no headers, no body, no server address', () => {
    const status = { kind: 'Status', apiVersion: 'v1', status: 'Failure', message: 'pods "inference-rep-1" is forbidden: exceeded quota: gpu-quota', reason: 'Forbidden', code: 403 };
    const refused = new ApiException(403, 'HTTP-Code: 403\nMessage: Unknown API Status Code!\nBody: {...}\nHeaders: {"audit-id":"x","server":"https://10.0.0.1:6443"}', JSON.stringify(status), { 'audit-id': 'x' });
    const shown = apiFailure(refused, 'its pod').message;
    expect(shown).toBe('the Kubernetes API refused its pod (HTTP 403: pods "inference-rep-1" is forbidden: exceeded quota: gpu-quota)');
    expect(apiFailure(new ApiException(401, 'HTTP-Code: 401 Headers: {}', undefined, {}), 'its pod').message).toBe('the Kubernetes API refused its pod (HTTP 401)');
  });
});
