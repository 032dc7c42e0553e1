/**
 * The scheduler and kubelet of the fake cluster (fake-kube-api.ts): binds each pod to a node as
 * the real scheduler would (node selector, untolerated NoSchedule taints, free GPUs; otherwise
 * `Unschedulable` in its words), does what the `fetch-agent` init container's script does
 * (downloads the agent from the control plane and checks its SHA-256), and runs the `agent`
 * container's command as a real process with the pod's environment (Secret references
 * resolved). The `engine` container is not run: the agent's CPU engine stands in for it
 * (`agentEnvOverrides`), and it is reported running. Image pulls can be made to fail, agents
 * that exit are restarted with a back-off and shown in CrashLoopBackOff, deletions send SIGTERM
 * and SIGKILL after the (scaled) grace period. `stop()` kills everything it started.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { V1Container, V1ContainerStatus, V1Node, V1Pod } from '@kubernetes/client-node';
import type { FakeKubeApi } from './fake-kube-api';

export interface TestKubeletOptions {
  /** Environment over the agent container's (e.g. WORKER_ENGINE=cpu); WORKER_ENGINE_URL is dropped. */
  readonly agentEnvOverrides?: Record<string, string>;
  /** Grace periods are this fraction of what the pod says (tests do not wait 120 s). */
  readonly graceScale?: number;
  /** First restart back-off of an exited container (doubling, at most 1 s). */
  readonly restartBackoffMs?: number;
  readonly gpuResource?: string;
}

interface RunningPod {
  readonly namespace: string;
  readonly name: string;
  readonly dir: string;
  child: ChildProcess | null;
  output: string[];
  quickExits: number;
  deleting: boolean;
  timers: NodeJS.Timeout[];
}

const MAX_BACKOFF_MS = 1_000;
const OUTPUT_LINES = 20;

export class TestKubelet {
  private readonly running = new Map<string, RunningPod>();
  private readonly pending = new Set<string>();
  private readonly failingImages = new Set<string>();
  private extraEnv: Record<string, string> = {};
  private stopped = false;
  private readonly gpuResource: string;

  constructor(private readonly api: FakeKubeApi, private readonly options: TestKubeletOptions = {}) {
    this.gpuResource = options.gpuResource ?? 'nvidia.com/gpu';
  }

  start(): void {
    this.api.kubeletAttached = true;
    this.api.onPod((type, pod) => {
      if (this.stopped) return;
      const key = `${pod.metadata!.namespace}/${pod.metadata!.name}`;
      if (type === 'ADDED') this.schedule(pod);
      if (type === 'MODIFIED' && pod.metadata?.deletionTimestamp) this.terminate(key, pod);
      if (type === 'DELETED') {
        this.pending.delete(key);
        this.retryPending();
      }
    });
    this.api.onNode(() => this.retryPending());
  }

  /** Pulls of this image fail (ErrImagePull, then ImagePullBackOff) until called with null. */
  failImagePull(image: string | null): void {
    if (image === null) this.failingImages.clear();
    else this.failingImages.add(image);
  }

  /** More environment for agents started from now on (e.g. a bad setting that makes them exit). */
  setAgentEnv(env: Record<string, string>): void {
    this.extraEnv = env;
  }

  processOf(podName: string): ChildProcess | null {
    return [...this.running.values()].find((pod) => pod.name === podName)?.child ?? null;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    const exits: Array<Promise<unknown>> = [];
    for (const pod of this.running.values()) {
      for (const timer of pod.timers) clearTimeout(timer);
      if (pod.child && pod.child.exitCode === null && pod.child.signalCode === null) {
        exits.push(new Promise((resolve) => pod.child!.once('exit', resolve)));
        pod.child.kill('SIGKILL');
      }
    }
    await Promise.all(exits);
    for (const pod of this.running.values()) fs.rmSync(pod.dir, { recursive: true, force: true });
    this.running.clear();
  }

  // ---- scheduling ---------------------------------------------------------------------------

  private retryPending(): void {
    for (const key of [...this.pending]) {
      const pod = this.api.pods().find((candidate) => `${candidate.metadata!.namespace}/${candidate.metadata!.name}` === key);
      if (pod && !pod.metadata?.deletionTimestamp) this.schedule(pod);
      else this.pending.delete(key);
    }
  }

  private schedule(pod: V1Pod): void {
    const namespace = pod.metadata!.namespace!;
    const name = pod.metadata!.name!;
    const key = `${namespace}/${name}`;
    if (pod.spec?.nodeName || this.running.has(key)) return;
    const wanted = gpusOf(pod, this.gpuResource);
    const nodes = this.api.nodes();
    const reasons = new Map<string, number>();
    const why = (reason: string) => reasons.set(reason, (reasons.get(reason) ?? 0) + 1);
    let chosen: V1Node | null = null;
    for (const node of nodes) {
      const labels = node.metadata?.labels ?? {};
      if (Object.entries(pod.spec?.nodeSelector ?? {}).some(([label, value]) => labels[label] !== value)) {
        why("node(s) didn't match Pod's node affinity/selector");
        continue;
      }
      const untolerated = (node.spec?.taints ?? []).find((taint) => (taint.effect === 'NoSchedule' || taint.effect === 'NoExecute')
        && !(pod.spec?.tolerations ?? []).some((toleration) => (toleration.key === undefined || toleration.key === taint.key)
          && (toleration.effect === undefined || toleration.effect === taint.effect)
          && (toleration.operator === 'Exists' || toleration.value === taint.value)));
      if (untolerated) {
        why(`node(s) had untolerated taint {${untolerated.key}: ${untolerated.value ?? ''}}`);
        continue;
      }
      const free = Number(node.status?.allocatable?.[this.gpuResource] ?? 0) - this.gpusBoundTo(node.metadata!.name!);
      if (free < wanted) {
        why(`Insufficient ${this.gpuResource}`);
        continue;
      }
      chosen = node;
      break;
    }
    if (!chosen) {
      const message = `0/${nodes.length} nodes are available: ${[...reasons].map(([reason, count]) => `${count} ${reason}`).join(', ')}. preemption: 0/${nodes.length} nodes are available: ${nodes.length} Preemption is not helpful for scheduling.`;
      this.pending.add(key);
      const current = pod.status?.conditions?.find((condition) => condition.type === 'PodScheduled');
      if (current?.message === message) return;
      this.api.updatePod(namespace, name, (stored) => {
        stored.status = { ...stored.status, phase: 'Pending', conditions: [{ type: 'PodScheduled', status: 'False', reason: 'Unschedulable', message, lastTransitionTime: new Date() }] };
      });
      this.api.recordEvent(namespace, { kind: 'Pod', name }, 'Warning', 'FailedScheduling', message);
      return;
    }
    this.pending.delete(key);
    const nodeName = chosen.metadata!.name!;
    this.api.updatePod(namespace, name, (stored) => {
      stored.spec!.nodeName = nodeName;
      stored.status = {
        phase: 'Pending', hostIP: '127.0.0.1', conditions: [{ type: 'PodScheduled', status: 'True', lastTransitionTime: new Date() }],
        initContainerStatuses: (stored.spec!.initContainers ?? []).map((container) => waitingStatus(container, 'PodInitializing')),
        containerStatuses: stored.spec!.containers.map((container) => waitingStatus(container, 'PodInitializing')),
      };
    });
    this.api.recordEvent(namespace, { kind: 'Pod', name }, 'Normal', 'Scheduled', `Successfully assigned ${namespace}/${name} to ${nodeName}`);
    const running: RunningPod = { namespace, name, dir: fs.mkdtempSync(path.join(os.tmpdir(), `kubelet-${name}-`)), child: null, output: [], quickExits: 0, deleting: false, timers: [] };
    this.running.set(key, running);
    void this.initialise(running, pod).catch((error: Error) => this.initFailed(running, pod, 1, error.message));
  }

  private gpusBoundTo(nodeName: string): number {
    return this.api.pods().filter((pod) => pod.spec?.nodeName === nodeName && pod.status?.phase !== 'Succeeded' && pod.status?.phase !== 'Failed')
      .reduce((sum, pod) => sum + gpusOf(pod, this.gpuResource), 0);
  }

  // ---- containers ---------------------------------------------------------------------------

  /** The init container's script: fetch the agent and check its SHA-256 (then the images). */
  private async initialise(running: RunningPod, pod: V1Pod): Promise<void> {
    if (this.imagesFail(running, pod)) return;
    const fetcher = (pod.spec?.initContainers ?? []).find((container) => container.name === 'fetch-agent');
    if (fetcher) {
      const env = Object.fromEntries((fetcher.env ?? []).map((variable) => [variable.name, variable.value ?? '']));
      const response = await fetch(env.AGENT_URL);
      if (!response.ok) throw new Error(`curl: (22) The requested URL returned error: ${response.status}`);
      const bytes = Buffer.from(await response.arrayBuffer());
      const actual = crypto.createHash('sha256').update(bytes).digest('hex');
      if (actual !== env.AGENT_SHA256) throw new Error(`/agent/worker-agent: FAILED\nsha256sum: WARNING: 1 computed checksum did NOT match`);
      fs.writeFileSync(path.join(running.dir, 'worker-agent'), bytes, { mode: 0o755 });
      this.api.updatePod(running.namespace, running.name, (stored) => {
        stored.status!.initContainerStatuses = (stored.spec!.initContainers ?? []).map((container) => ({
          name: container.name, image: container.image!, imageID: '', ready: true, restartCount: 0, state: { terminated: { exitCode: 0, reason: 'Completed' } },
        }));
      });
    }
    this.startAgent(running, pod);
  }

  /** Images that cannot be pulled keep the pod Pending (ErrImagePull, then ImagePullBackOff), retried. */
  private imagesFail(running: RunningPod, pod: V1Pod): boolean {
    const failing = pod.spec!.containers.find((container) => this.failingImages.has(container.image!) || container.image!.includes('does-not-exist'));
    if (!failing) return false;
    const stored = this.api.pods().find((candidate) => candidate.metadata?.name === running.name);
    const previous = stored?.status?.containerStatuses?.find((status) => status.name === failing.name)?.state?.waiting?.reason;
    const reason = previous === 'ErrImagePull' || previous === 'ImagePullBackOff' ? 'ImagePullBackOff' : 'ErrImagePull';
    const message = reason === 'ErrImagePull'
      ? `failed to pull and unpack image "docker.io/${failing.image}": failed to resolve reference "docker.io/${failing.image}": not found`
      : `Back-off pulling image "${failing.image}"`;
    this.api.updatePod(running.namespace, running.name, (current) => {
      current.status!.containerStatuses = current.spec!.containers.map((container) => (container.name === failing.name
        ? { name: container.name, image: container.image!, imageID: '', ready: false, restartCount: 0, state: { waiting: { reason, message } } }
        : waitingStatus(container, 'PodInitializing')));
    });
    this.api.recordEvent(running.namespace, { kind: 'Pod', name: running.name }, 'Warning', reason === 'ErrImagePull' ? 'Failed' : 'BackOff', message);
    running.timers.push(setTimeout(() => {
      if (!running.deleting && !this.stopped) void this.initialise(running, pod).catch((error: Error) => this.initFailed(running, pod, 1, error.message));
    }, 200));
    return true;
  }

  private initFailed(running: RunningPod, pod: V1Pod, exitCode: number, message: string): void {
    if (running.deleting || this.stopped) return;
    running.quickExits += 1;
    this.api.updatePod(running.namespace, running.name, (stored) => {
      stored.status!.initContainerStatuses = (stored.spec!.initContainers ?? []).map((container) => ({
        name: container.name, image: container.image!, imageID: '', ready: false, restartCount: running.quickExits,
        state: running.quickExits >= 2 ? { waiting: { reason: 'CrashLoopBackOff', message: `back-off restarting failed container=${container.name} pod=${running.name}` } } : { terminated: { exitCode, reason: 'Error', message } },
        lastState: { terminated: { exitCode, reason: 'Error', message } },
      }));
    });
    running.timers.push(setTimeout(() => {
      if (!running.deleting && !this.stopped) void this.initialise(running, pod).catch((error: Error) => this.initFailed(running, pod, 1, error.message));
    }, this.backoff(running)));
  }

  private startAgent(running: RunningPod, pod: V1Pod): void {
    if (running.deleting || this.stopped) return;
    const container = pod.spec!.containers.find((candidate) => candidate.name === 'agent');
    if (!container) return;
    const env = this.environment(running, container);
    if (typeof env === 'string') {
      this.setContainer(running, pod, 'agent', { state: { waiting: { reason: 'CreateContainerConfigError', message: env } }, ready: false });
      running.timers.push(setTimeout(() => this.startAgent(running, pod), 200));
      return;
    }
    const command = (container.command ?? []).map((part) => part.replace(/^\/agent\//, `${running.dir}/`));
    const startedAt = Date.now();
    const child = spawn(command[0], [...command.slice(1), ...(container.args ?? [])], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    running.child = child;
    const keep = (chunk: Buffer) => {
      for (const line of chunk.toString('utf8').split('\n')) if (line.trim()) running.output.push(line.trim().slice(0, 300));
      if (running.output.length > OUTPUT_LINES) running.output.splice(0, running.output.length - OUTPUT_LINES);
    };
    child.stdout!.on('data', keep);
    child.stderr!.on('data', keep);
    this.setContainer(running, pod, 'agent', { state: { running: { startedAt: new Date() } }, ready: true }, 'Running');
    child.once('exit', (code, signal) => {
      running.child = null;
      if (running.deleting || this.stopped) {
        this.finishDeletion(running);
        return;
      }
      const exitCode = code ?? (signal === 'SIGKILL' ? 137 : 143);
      const plain = running.output.filter((line) => !line.startsWith('{')).slice(-3).join('\n') || running.output.slice(-1).join('');
      running.quickExits = Date.now() - startedAt < 10_000 ? running.quickExits + 1 : 1;
      const terminated = { exitCode, reason: 'Error', message: plain, finishedAt: new Date() };
      this.setContainer(running, pod, 'agent', running.quickExits >= 2
        ? { state: { waiting: { reason: 'CrashLoopBackOff', message: `back-off ${Math.round(this.backoff(running) / 1000)}s restarting failed container=agent pod=${running.name}` } }, lastState: { terminated }, ready: false }
        : { state: { terminated }, lastState: { terminated }, ready: false });
      if (running.quickExits >= 2) this.api.recordEvent(running.namespace, { kind: 'Pod', name: running.name }, 'Warning', 'BackOff', 'Back-off restarting failed container agent');
      running.timers.push(setTimeout(() => this.startAgent(running, pod), this.backoff(running)));
    });
  }

  /** The container's environment with Secret references resolved; a string says why it cannot be made. */
  private environment(running: RunningPod, container: V1Container): NodeJS.ProcessEnv | string {
    const env: NodeJS.ProcessEnv = { PATH: process.env.PATH, HOME: process.env.HOME };
    for (const variable of container.env ?? []) {
      if (variable.value !== undefined) env[variable.name] = variable.value;
      const reference = variable.valueFrom?.secretKeyRef;
      if (!reference) continue;
      const secret = this.api.secrets().find((candidate) => candidate.metadata?.namespace === running.namespace && candidate.metadata?.name === reference.name);
      if (!secret) return `secret "${reference.name}" not found`;
      const value = secret.data?.[reference.key];
      if (value === undefined) return `couldn't find key ${reference.key} in Secret ${running.namespace}/${reference.name}`;
      env[variable.name] = Buffer.from(value, 'base64').toString('utf8');
    }
    delete env.WORKER_ENGINE_URL;
    return { ...env, ...this.options.agentEnvOverrides, ...this.extraEnv };
  }

  private setContainer(running: RunningPod, pod: V1Pod, name: string, status: Partial<V1ContainerStatus>, phase?: string): void {
    this.api.updatePod(running.namespace, running.name, (stored) => {
      const previous = stored.status?.containerStatuses ?? [];
      stored.status!.containerStatuses = stored.spec!.containers.map((container) => {
        const before = previous.find((candidate) => candidate.name === container.name);
        if (container.name === name) {
          return { name, image: container.image!, imageID: '', restartCount: Math.max(0, running.quickExits), ...before, ...status, ready: status.ready ?? false } as V1ContainerStatus;
        }
        // The engine container is not run here (the agent's CPU engine stands in): reported running.
        return container.name === 'engine' ? { name: container.name, image: container.image!, imageID: '', ready: true, restartCount: 0, state: { running: { startedAt: new Date() } } } : before ?? waitingStatus(container, 'PodInitializing');
      });
      if (phase) stored.status!.phase = phase;
      stored.status!.podIP = '127.0.0.1';
    });
    void pod;
  }

  private backoff(running: RunningPod): number {
    return Math.min(MAX_BACKOFF_MS, (this.options.restartBackoffMs ?? 50) * 2 ** Math.max(0, running.quickExits - 1));
  }

  // ---- deletion -----------------------------------------------------------------------------

  private terminate(key: string, pod: V1Pod): void {
    const running = this.running.get(key);
    if (!running) {
      // Never bound (pending): nothing runs; it goes at once.
      this.pending.delete(key);
      this.api.removePod(pod.metadata!.namespace!, pod.metadata!.name!);
      return;
    }
    if (running.deleting) return;
    running.deleting = true;
    for (const timer of running.timers) clearTimeout(timer);
    this.api.recordEvent(running.namespace, { kind: 'Pod', name: running.name }, 'Normal', 'Killing', 'Stopping container agent');
    const child = running.child;
    if (!child) {
      this.finishDeletion(running);
      return;
    }
    child.kill('SIGTERM');
    const graceSeconds = Number(pod.metadata?.deletionGracePeriodSeconds ?? pod.spec?.terminationGracePeriodSeconds ?? 30);
    running.timers.push(setTimeout(() => child.kill('SIGKILL'), graceSeconds * 1000 * (this.options.graceScale ?? 1)));
  }

  private finishDeletion(running: RunningPod): void {
    for (const timer of running.timers) clearTimeout(timer);
    this.running.delete(`${running.namespace}/${running.name}`);
    fs.rmSync(running.dir, { recursive: true, force: true });
    if (!this.stopped) this.api.removePod(running.namespace, running.name);
  }
}

function gpusOf(pod: V1Pod, resource: string): number {
  return (pod.spec?.containers ?? []).reduce((sum, container) => sum + Number(container.resources?.limits?.[resource] ?? container.resources?.requests?.[resource] ?? 0), 0);
}

function waitingStatus(container: V1Container, reason: string): V1ContainerStatus {
  return { name: container.name, image: container.image!, imageID: '', ready: false, restartCount: 0, state: { waiting: { reason } } };
}
