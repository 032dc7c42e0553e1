/**
 * The default scheduler of the fake cluster. Its filters run in the real one's order and say
 * why a node does not fit in its words: cordoned (`node(s) were unschedulable`), an untolerated
 * NoSchedule/NoExecute taint, the node selector or required node affinity, then resources —
 * the pod's requests (requests default to limits; init containers count at their largest)
 * against the node's allocatable minus what the unfinished pods bound to it request. A pod no
 * node takes stays Pending with `PodScheduled=False/Unschedulable` and the real scheduler's
 * message (`0/3 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, 2
 * Insufficient nvidia.com/gpu. preemption: …`) and a FailedScheduling event; it is tried again
 * when a pod goes or finishes and when a node comes or changes. Among the nodes that fit, the one
 * whose labels and name match the most weight of the pod's preferred node affinity wins (the real
 * scheduler's NodeAffinity score; its other scores are left out), then the first by name.
 */
import type { V1Node, V1NodeSelectorRequirement, V1NodeSelectorTerm, V1Pod, V1PodCondition, V1Taint, V1Toleration } from '@kubernetes/client-node';
import type { FakeKubeApi } from './fake-kube-api';
import { kubeTime } from './fake-kube-resources';

export type Placement = { readonly node: string } | { readonly unschedulable: string };

/** Filter failures the real scheduler cannot resolve by preempting other pods. */
type Failure = { readonly reason: string; readonly resolvable: boolean };

const UNSCHEDULABLE_TAINT = 'node.kubernetes.io/unschedulable';

/** `8`, `500m`, `64Gi`, `1e3` as numbers (cpu in cores, memory in bytes). */
export function parseQuantity(quantity: string | number | undefined): number {
  if (quantity === undefined) return 0;
  if (typeof quantity === 'number') return quantity;
  const match = /^([+-]?[0-9.]+(?:[eE][+-]?[0-9]+)?)(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?$/.exec(quantity.trim());
  if (!match) return Number.NaN;
  const factors: Record<string, number> = {
    m: 1e-3, k: 1e3, M: 1e6, G: 1e9, T: 1e12, P: 1e15, E: 1e18,
    Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30, Ti: 2 ** 40, Pi: 2 ** 50, Ei: 2 ** 60,
  };
  return Number(match[1]) * (match[2] ? factors[match[2]] : 1);
}

/** What a pod asks of its node: per resource, max(sum over containers, largest init container). */
export function podRequests(pod: V1Pod): Map<string, number> {
  const requested = (resources: { requests?: Record<string, string>; limits?: Record<string, string> } | undefined) => {
    const amounts = new Map<string, number>();
    for (const [name, value] of Object.entries({ ...resources?.limits, ...resources?.requests })) amounts.set(name, parseQuantity(value));
    return amounts;
  };
  const total = new Map<string, number>();
  for (const container of pod.spec?.containers ?? []) {
    for (const [name, amount] of requested(container.resources)) total.set(name, (total.get(name) ?? 0) + amount);
  }
  for (const container of pod.spec?.initContainers ?? []) {
    for (const [name, amount] of requested(container.resources)) total.set(name, Math.max(total.get(name) ?? 0, amount));
  }
  return total;
}

function tolerates(toleration: V1Toleration, taint: V1Taint): boolean {
  if (toleration.effect && toleration.effect !== taint.effect) return false;
  if (toleration.key && toleration.key !== taint.key) return false;
  if (toleration.operator === 'Exists') return true;
  return (toleration.value ?? '') === (taint.value ?? '');
}

function matchesExpression(labels: Record<string, string>, requirement: V1NodeSelectorRequirement): boolean {
  const value = labels[requirement.key];
  const values = requirement.values ?? [];
  switch (requirement.operator) {
    case 'In': return value !== undefined && values.includes(value);
    case 'NotIn': return value === undefined || !values.includes(value);
    case 'Exists': return value !== undefined;
    case 'DoesNotExist': return value === undefined;
    case 'Gt': return value !== undefined && Number(value) > Number(values[0]);
    case 'Lt': return value !== undefined && Number(value) < Number(values[0]);
    default: return false;
  }
}

/** A node selector term: its label expressions and its field requirements (only `metadata.name`), all of them. */
function matchesTerm(term: V1NodeSelectorTerm, node: V1Node): boolean {
  const expressions = term.matchExpressions ?? [];
  const fields = term.matchFields ?? [];
  if (expressions.length === 0 && fields.length === 0) return false;
  return expressions.every((requirement) => matchesExpression(node.metadata?.labels ?? {}, requirement))
    && fields.every((requirement) => matchesExpression({ 'metadata.name': node.metadata?.name ?? '' }, requirement));
}

/** The weight of the pod's preferred node affinity terms the node matches. */
function preferenceScore(pod: V1Pod, node: V1Node): number {
  return (pod.spec?.affinity?.nodeAffinity?.preferredDuringSchedulingIgnoredDuringExecution ?? [])
    .filter((term) => matchesTerm(term.preference, node)).reduce((sum, term) => sum + term.weight, 0);
}

function matchesNodeSelection(pod: V1Pod, node: V1Node): boolean {
  const labels = node.metadata?.labels ?? {};
  if (Object.entries(pod.spec?.nodeSelector ?? {}).some(([key, value]) => labels[key] !== value)) return false;
  const terms = pod.spec?.affinity?.nodeAffinity?.requiredDuringSchedulingIgnoredDuringExecution?.nodeSelectorTerms;
  if (!terms || terms.length === 0) return true;
  // Terms are ORed, a term's expressions ANDed (an empty term matches nothing).
  return terms.some((term) => matchesTerm(term, node));
}

function terminal(pod: V1Pod): boolean {
  return pod.status?.phase === 'Succeeded' || pod.status?.phase === 'Failed';
}

/** Why a node cannot take the pod (empty: it can), in the order the real filters run. */
function filterNode(pod: V1Pod, node: V1Node, boundPods: readonly V1Pod[]): Failure[] {
  const tolerations = pod.spec?.tolerations ?? [];
  if (node.spec?.unschedulable && !tolerations.some((toleration) => tolerates(toleration, { key: UNSCHEDULABLE_TAINT, effect: 'NoSchedule' }))) {
    return [{ reason: 'node(s) were unschedulable', resolvable: false }];
  }
  const untolerated = (node.spec?.taints ?? []).find((taint) => (taint.effect === 'NoSchedule' || taint.effect === 'NoExecute') && !tolerations.some((toleration) => tolerates(toleration, taint)));
  if (untolerated) return [{ reason: `node(s) had untolerated taint {${untolerated.key}: ${untolerated.value ?? ''}}`, resolvable: false }];
  if (!matchesNodeSelection(pod, node)) return [{ reason: "node(s) didn't match Pod's node affinity/selector", resolvable: false }];
  const allocatable = node.status?.allocatable ?? {};
  const used = new Map<string, number>();
  for (const other of boundPods) {
    if (other.spec?.nodeName !== node.metadata?.name || terminal(other)) continue;
    for (const [name, amount] of podRequests(other)) used.set(name, (used.get(name) ?? 0) + amount);
  }
  const failures: Failure[] = [];
  for (const [name, amount] of podRequests(pod)) {
    if (amount <= 0) continue;
    // A node built without cpu or memory figures is taken to have plenty (tests describe GPUs).
    if ((name === 'cpu' || name === 'memory' || name === 'ephemeral-storage') && allocatable[name] === undefined) continue;
    if (parseQuantity(allocatable[name] ?? '0') - (used.get(name) ?? 0) < amount) failures.push({ reason: `Insufficient ${name}`, resolvable: true });
  }
  return failures;
}

/** `1 node(s) …, 2 Insufficient …` sorted as the real scheduler sorts its histogram (as strings). */
function histogram(reasons: readonly string[]): string {
  const counts = new Map<string, number>();
  for (const reason of reasons) counts.set(reason, (counts.get(reason) ?? 0) + 1);
  return [...counts].map(([reason, count]) => `${count} ${reason}`).sort().join(', ');
}

/** Where the pod goes, or the real scheduler's message for why nowhere. */
export function placePod(pod: V1Pod, nodes: readonly V1Node[], boundPods: readonly V1Pod[]): Placement {
  if (nodes.length === 0) return { unschedulable: 'no nodes available to schedule pods' };
  const reasons: string[] = [];
  const preemption: string[] = [];
  let best: { node: V1Node; score: number } | null = null;
  for (const node of [...nodes].sort((a, b) => (a.metadata?.name ?? '').localeCompare(b.metadata?.name ?? ''))) {
    const failures = filterNode(pod, node, boundPods);
    if (failures.length === 0) {
      const score = preferenceScore(pod, node);
      if (!best || score > best.score) best = { node, score };
      continue;
    }
    reasons.push(...failures.map((failure) => failure.reason));
    preemption.push(failures.every((failure) => failure.resolvable) ? 'No preemption victims found for incoming pod' : 'Preemption is not helpful for scheduling');
  }
  if (best) return { node: best.node.metadata!.name! };
  return { unschedulable: `0/${nodes.length} nodes are available: ${histogram(reasons)}. preemption: 0/${nodes.length} nodes are available: ${histogram(preemption)}.` };
}

/** Binds pending pods of the FakeKubeApi to its nodes (see the file's header). */
export class FakeScheduler {
  private unsubscribes: Array<() => void> = [];
  private pass: NodeJS.Immediate | null = null;

  constructor(private readonly api: FakeKubeApi) {}

  start(): void {
    this.unsubscribes.push(this.api.on('pod', (type, pod, previous) => {
      const finished = type === 'MODIFIED' && terminal(pod) && previous !== undefined && !terminal(previous);
      if ((type === 'ADDED' && !pod.spec?.nodeName) || type === 'DELETED' || finished) this.schedule();
    }));
    this.unsubscribes.push(this.api.on('node', () => this.schedule()));
    this.schedule();
  }

  stop(): void {
    for (const unsubscribe of this.unsubscribes) unsubscribe();
    this.unsubscribes = [];
    if (this.pass) clearImmediate(this.pass);
    this.pass = null;
  }

  /** One pass over the pending pods, soon (a real scheduler binds after the create returned, too). */
  private schedule(): void {
    this.pass ??= setImmediate(() => {
      this.pass = null;
      this.runPass();
    });
  }

  private runPass(): void {
    const pending = this.api.pods().filter((pod) => !pod.spec?.nodeName && !pod.metadata?.deletionTimestamp && !terminal(pod)
      && (pod.spec?.schedulerName ?? 'default-scheduler') === 'default-scheduler');
    pending.sort((a, b) => (b.spec?.priority ?? 0) - (a.spec?.priority ?? 0) || Number(a.metadata?.resourceVersion) - Number(b.metadata?.resourceVersion));
    for (const pod of pending) {
      const namespace = pod.metadata!.namespace!;
      const name = pod.metadata!.name!;
      const placement = placePod(pod, this.api.nodes(), this.api.pods());
      if ('node' in placement) {
        this.api.updatePod(namespace, name, (bound) => {
          bound.spec!.nodeName = placement.node;
          bound.status = { ...bound.status, conditions: withCondition(bound.status?.conditions, { type: 'PodScheduled', status: 'True' }) };
        });
        this.api.recordEvent({ namespace, involvedObject: { kind: 'Pod', name }, type: 'Normal', reason: 'Scheduled', message: `Successfully assigned ${namespace}/${name} to ${placement.node}`, component: 'default-scheduler' });
        continue;
      }
      const current = pod.status?.conditions?.find((condition) => condition.type === 'PodScheduled');
      if (current?.status !== 'False' || current.message !== placement.unschedulable) {
        this.api.updatePod(namespace, name, (waiting) => {
          waiting.status = {
            ...waiting.status, phase: 'Pending',
            conditions: withCondition(waiting.status?.conditions, { type: 'PodScheduled', status: 'False', reason: 'Unschedulable', message: placement.unschedulable }),
          };
        });
      }
      this.api.recordEvent({ namespace, involvedObject: { kind: 'Pod', name }, type: 'Warning', reason: 'FailedScheduling', message: placement.unschedulable, component: 'default-scheduler' });
    }
  }
}

/** Replaces the condition of that type; its transition time moves only when its status does. */
function withCondition(conditions: V1PodCondition[] | undefined, next: Omit<V1PodCondition, 'lastTransitionTime' | 'lastProbeTime'>): V1PodCondition[] {
  const previous = conditions?.find((condition) => condition.type === next.type);
  const lastTransitionTime = previous?.status === next.status && previous.lastTransitionTime ? previous.lastTransitionTime : kubeTime();
  // Wire form: the time is a string, as the API server sends it (the model's type says Date).
  const condition = { ...next, lastProbeTime: null, lastTransitionTime } as unknown as V1PodCondition;
  return [...(conditions ?? []).filter((candidate) => candidate.type !== next.type), condition];
}
