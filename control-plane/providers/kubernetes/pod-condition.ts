/**
 * What a replica's pod says about it, in the replica's terms: still waiting (for GPU capacity,
 * for its images), failed for good (its image cannot be pulled, a container crash-loops, its
 * configuration is broken), or nothing to report (running: its agent joins by itself).
 */
import type { V1ContainerStatus, V1Pod } from '@kubernetes/client-node';

export type PodCondition =
  | { readonly kind: 'waiting'; readonly reason: string }
  | { readonly kind: 'failed'; readonly reason: string }
  | { readonly kind: 'running' };

/** Waiting reasons that do not fix themselves: the replica ends with the container's message. */
const FATAL_WAITING = new Set(['ErrImagePull', 'ImagePullBackOff', 'InvalidImageName', 'ErrImageNeverPull', 'CrashLoopBackOff', 'CreateContainerConfigError', 'CreateContainerError', 'RunContainerError']);
/** What a message may carry into the replica's status (it is shown in the console and the API). */
const MAX_MESSAGE = 500;

function clip(text: string): string {
  const line = text.replace(/\s+/g, ' ').trim();
  return line.length > MAX_MESSAGE ? `${line.slice(0, MAX_MESSAGE - 1)}…` : line;
}

function containerFailure(status: V1ContainerStatus, init: boolean): string | null {
  const waiting = status.state?.waiting;
  if (!waiting?.reason || !FATAL_WAITING.has(waiting.reason)) return null;
  const which = `${init ? 'init container' : 'container'} ${status.name}`;
  if (waiting.reason === 'CrashLoopBackOff') {
    const last = status.lastState?.terminated;
    const exit = last ? `exit code ${last.exitCode}${last.reason ? ` (${last.reason})` : ''}` : 'it keeps exiting';
    return clip(`${which} is crash-looping: ${exit}${last?.message ? `: ${last.message}` : ''}`);
  }
  if (waiting.reason === 'ErrImagePull' || waiting.reason === 'ImagePullBackOff' || waiting.reason === 'InvalidImageName' || waiting.reason === 'ErrImageNeverPull') {
    return clip(`${which} image ${status.image} cannot be pulled (${waiting.reason})${waiting.message ? `: ${waiting.message}` : ''}`);
  }
  return clip(`${which} cannot start (${waiting.reason})${waiting.message ? `: ${waiting.message}` : ''}`);
}

export function podCondition(pod: V1Pod): PodCondition {
  const status = pod.status ?? {};
  if (status.phase === 'Failed') return { kind: 'failed', reason: clip(`the pod failed${status.reason ? ` (${status.reason})` : ''}${status.message ? `: ${status.message}` : ''}`) };
  for (const container of status.initContainerStatuses ?? []) {
    const failure = containerFailure(container, true);
    if (failure) return { kind: 'failed', reason: failure };
  }
  for (const container of status.containerStatuses ?? []) {
    const failure = containerFailure(container, false);
    if (failure) return { kind: 'failed', reason: failure };
  }
  const scheduled = (status.conditions ?? []).find((condition) => condition.type === 'PodScheduled');
  if (scheduled?.status === 'False') {
    return { kind: 'waiting', reason: clip(`waiting for GPU capacity: ${scheduled.message || scheduled.reason || 'the scheduler found no node'}`) };
  }
  if (status.phase === 'Pending') {
    const pulling = [...(status.initContainerStatuses ?? []), ...(status.containerStatuses ?? [])].find((container) => container.state?.waiting?.reason === 'PodInitializing' || container.state?.waiting?.reason === 'ContainerCreating');
    if (!scheduled) return { kind: 'waiting', reason: 'pod created, waiting for the scheduler' };
    return { kind: 'waiting', reason: pulling ? 'pod starting: pulling images and fetching the agent' : 'pod scheduled, starting' };
  }
  return { kind: 'running' };
}
