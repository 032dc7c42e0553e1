/**
 * A pod's status as the kubelet composes it from its containers' statuses: the phase by the
 * kubelet's rules (Pending while an init container has not completed or a container has never
 * started — an image that cannot be pulled keeps the pod Pending; Running once every container
 * started, even if one is now crash-looping; Succeeded or Failed once all ended and will not be
 * restarted) and the conditions with the kubelet's reasons and messages.
 */
import type { V1ContainerStatus, V1PodCondition, V1PodStatus } from '@kubernetes/client-node';
import { kubeTime } from './fake-kube-resources';

export interface PodStatusInput {
  readonly restartPolicy: string;
  readonly initContainerStatuses: readonly V1ContainerStatus[];
  readonly containerStatuses: readonly V1ContainerStatus[];
  /** The status the pod has now (the scheduler's PodScheduled condition, transition times). */
  readonly current: V1PodStatus | undefined;
  readonly hostIP: string;
  readonly podIP: string;
  readonly startTime: string;
  /** The pod is being deleted and every container has stopped. */
  readonly terminated: boolean;
}

function initialised(statuses: readonly V1ContainerStatus[]): boolean {
  return statuses.every((status) => status.state?.terminated?.exitCode === 0);
}

export function podPhase(input: Omit<PodStatusInput, 'current' | 'hostIP' | 'podIP' | 'startTime'>): string {
  const { restartPolicy, initContainerStatuses, containerStatuses } = input;
  const initFailed = initContainerStatuses.some((status) => (status.state?.terminated?.exitCode ?? 0) !== 0);
  if (!initialised(initContainerStatuses)) return restartPolicy === 'Never' && initFailed ? 'Failed' : 'Pending';
  let running = 0;
  let waiting = 0;
  let stopped = 0;
  let succeeded = 0;
  for (const status of containerStatuses) {
    if (status.state?.running) running += 1;
    else if (status.state?.terminated) {
      stopped += 1;
      if (status.state.terminated.exitCode === 0) succeeded += 1;
    } else if (status.lastState?.terminated) stopped += 1;
    else waiting += 1;
  }
  if (input.terminated) return succeeded === containerStatuses.length ? 'Succeeded' : 'Failed';
  if (waiting > 0) return 'Pending';
  if (running > 0) return 'Running';
  if (stopped === containerStatuses.length) {
    if (restartPolicy === 'Always') return 'Running';
    if (succeeded === stopped) return 'Succeeded';
    return restartPolicy === 'Never' ? 'Failed' : 'Running';
  }
  return 'Pending';
}

export function composePodStatus(input: PodStatusInput): V1PodStatus {
  const phase = podPhase(input);
  const initDone = initialised(input.initContainerStatuses);
  const unready = input.containerStatuses.filter((status) => !status.ready).map((status) => status.name);
  const incomplete = input.initContainerStatuses.filter((status) => status.state?.terminated?.exitCode !== 0).map((status) => status.name);
  const previous = input.current?.conditions ?? [];
  const condition = (type: string, ok: boolean, reason?: string, message?: string): V1PodCondition => {
    const before = previous.find((candidate) => candidate.type === type);
    const status = ok ? 'True' : 'False';
    // Wire form: the time is a string, as the API server sends it (the model's type says Date).
    const lastTransitionTime = (before?.status === status && before.lastTransitionTime ? before.lastTransitionTime : kubeTime()) as unknown as Date;
    return { type, status, lastTransitionTime, ...(!ok && reason ? { reason } : {}), ...(!ok && message ? { message } : {}) };
  };
  const containersReady = unready.length === 0 && !input.terminated;
  const scheduled = previous.find((candidate) => candidate.type === 'PodScheduled');
  return {
    phase,
    conditions: [
      condition('PodReadyToStartContainers', !input.terminated),
      condition('Initialized', initDone, 'ContainersNotInitialized', `containers with incomplete status: [${incomplete.join(' ')}]`),
      condition('Ready', containersReady, input.terminated ? 'PodCompleted' : 'ContainersNotReady', input.terminated ? undefined : `containers with unready status: [${unready.join(' ')}]`),
      condition('ContainersReady', containersReady, input.terminated ? 'PodCompleted' : 'ContainersNotReady', input.terminated ? undefined : `containers with unready status: [${unready.join(' ')}]`),
      ...(scheduled ? [scheduled] : []),
    ],
    hostIP: input.hostIP, hostIPs: [{ ip: input.hostIP }],
    podIP: input.podIP, podIPs: [{ ip: input.podIP }],
    startTime: input.startTime as unknown as Date,
    ...(input.initContainerStatuses.length > 0 ? { initContainerStatuses: [...input.initContainerStatuses] } : {}),
    containerStatuses: [...input.containerStatuses],
    qosClass: input.current?.qosClass,
  };
}
