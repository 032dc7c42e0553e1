/**
 * Offers from a cluster's nodes: per configured GPU class, the GPUs its nodes can still give
 * (allocatable minus what bound, unfinished pods request), as offers of 1, 2, 4 and 8 GPUs on
 * one node: a replica's GPUs must share a node (tensor parallel), and placement takes the
 * cheapest offer whose memory fits the model under the price cap, as with every provider.
 */
import type { V1Node, V1Pod } from '@kubernetes/client-node';
import type { GpuOffer } from '../../replicas/gpu-offer';
import type { GpuClass, KubernetesConfig } from './kubernetes-config';

const SIZES = [1, 2, 4, 8] as const;

/** Quantities of extended resources (GPUs) are whole numbers. */
function count(value: string | undefined): number {
  const parsed = Number.parseInt(value ?? '0', 10);
  return Number.isFinite(parsed) && parsed > 0 ? parsed : 0;
}

/** GPUs a pod holds on its node: its containers' limits (requests equal limits for extended resources), or its init containers' largest. */
export function podGpus(pod: V1Pod, resource: string): number {
  const spec = pod.spec;
  if (!spec) return 0;
  const of = (containers: typeof spec.containers | undefined) => (containers ?? []).map((container) => count(container.resources?.limits?.[resource] ?? container.resources?.requests?.[resource]));
  const running = of(spec.containers).reduce((sum, gpus) => sum + gpus, 0);
  return Math.max(running, ...of(spec.initContainers));
}

function schedulable(node: V1Node): boolean {
  return !node.spec?.unschedulable && !(node.status?.conditions ?? []).some((condition) => condition.type === 'Ready' && condition.status !== 'True');
}

/** Free GPUs per node of each configured class (nodes of no configured class are not offered). */
export function freeGpusByClass(config: KubernetesConfig, nodes: readonly V1Node[], pods: readonly V1Pod[]): Map<GpuClass, number[]> {
  const used = new Map<string, number>();
  for (const pod of pods) {
    const node = pod.spec?.nodeName;
    const phase = pod.status?.phase;
    if (!node || phase === 'Succeeded' || phase === 'Failed') continue;
    used.set(node, (used.get(node) ?? 0) + podGpus(pod, config.gpuResource));
  }
  const free = new Map<GpuClass, number[]>();
  for (const gpuClass of config.gpuClasses) {
    const perNode: number[] = [];
    for (const node of nodes) {
      const labels = node.metadata?.labels ?? {};
      if (labels[config.gpuProductLabel] !== gpuClass.product || !schedulable(node)) continue;
      if (Object.entries(gpuClass.nodeSelector).some(([key, value]) => labels[key] !== value)) continue;
      const allocatable = count(node.status?.allocatable?.[config.gpuResource]);
      perNode.push(Math.max(0, allocatable - (used.get(node.metadata?.name ?? '') ?? 0)));
    }
    free.set(gpuClass, perNode);
  }
  return free;
}

export function offerId(gpuClass: GpuClass, gpus: number): string {
  return `kubernetes:${gpuClass.product}:x${gpus}`;
}

/** The offers of every class and size some node could take now (`available`: how many such replicas fit). */
export function gpuOffers(config: KubernetesConfig, nodes: readonly V1Node[], pods: readonly V1Pod[]): GpuOffer[] {
  const offers: GpuOffer[] = [];
  for (const [gpuClass, perNode] of freeGpusByClass(config, nodes, pods)) {
    for (const gpus of SIZES) {
      const available = perNode.reduce((sum, free) => sum + Math.floor(free / gpus), 0);
      if (available === 0) continue;
      offers.push({
        id: offerId(gpuClass, gpus), provider: 'kubernetes', gpuName: gpus === 1 ? gpuClass.product : `${gpus}× ${gpuClass.product}`,
        gpuMemoryGb: gpuClass.gpuMemoryGb * gpus, region: config.namespace, pricePerHour: gpuClass.pricePerGpuHour * gpus, available,
      });
    }
  }
  return offers;
}

/** The class and GPU count an offer id names, or null when it is not one of ours. */
export function parseOfferId(config: KubernetesConfig, id: string): { gpuClass: GpuClass; gpus: number } | null {
  const match = /^kubernetes:(.+):x(\d+)$/.exec(id);
  const gpuClass = match ? config.gpuClasses.find((candidate) => candidate.product === match[1]) : undefined;
  return gpuClass && match ? { gpuClass, gpus: Number(match[2]) } : null;
}
