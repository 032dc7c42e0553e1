/**
 * The scheduler and kubelet of the fake cluster (fake-kube-api.ts): every pod created there is
 * scheduled as the real scheduler would (fake-scheduler.ts) and, once bound, run on this machine
 * (kubelet-pod.ts): the `fetch-agent` init container's download and SHA-256 check played
 * without its image, the `agent` container's command run as a real process with the pod's
 * environment (Secret references resolved, `agentEnvOverrides` laid over it), the `engine`
 * container reported running without being run (the agent's CPU engine stands in for it).
 * Image pulls can be made to fail, exits are restarted with the kubelet's back-off, deletions
 * get SIGTERM then SIGKILL after the (scaled) grace period. `stop()` kills all it started.
 */
import type { ChildProcess } from 'node:child_process';
import type { V1Pod } from '@kubernetes/client-node';
import type { FakeKubeApi, PodLogSource, WatchEventType } from './fake-kube-api';
import { FakeScheduler } from './fake-scheduler';
import { KubeletPod, type ImageCache } from './kubelet-pod';

export interface TestKubeletOptions {
  /** Environment over the `agent` container's, e.g. `{ WORKER_ENGINE: 'cpu' }` (its WORKER_ENGINE_URL is dropped first). */
  readonly agentEnvOverrides?: Readonly<Record<string, string>>;
  /** Grace periods are this fraction of the pod's (default 1; e.g. 0.05). */
  readonly graceScale?: number;
  /** First restart back-off, 10 s on a real kubelet (default 50 ms); it doubles per restart up to `maxRestartBackoffMs`. */
  readonly restartBackoffMs?: number;
  /** Longest restart back-off, 5 min on a real kubelet (default 1000 ms). */
  readonly maxRestartBackoffMs?: number;
  /** How long a failed pull shows ErrImagePull before ImagePullBackOff (default: restartBackoffMs). */
  readonly imagePullBackoffMs?: number;
  /** Containers reported running without being run (default `['engine']`). */
  readonly simulatedContainers?: readonly string[];
  /** Also run the scheduler (default true; false: a test binds pods itself by setting spec.nodeName). */
  readonly schedule?: boolean;
}

export class TestKubelet implements PodLogSource {
  private readonly running = new Map<string, KubeletPod>();
  private readonly failingImages = new Set<string>();
  private readonly pulledImages = new Set<string>();
  private readonly scheduler: FakeScheduler | null;
  private extraAgentEnv: Readonly<Record<string, string>> = {};
  private unsubscribe: (() => void) | null = null;
  private readonly images: ImageCache;

  constructor(private readonly api: FakeKubeApi, private readonly options: TestKubeletOptions = {}) {
    this.scheduler = options.schedule === false ? null : new FakeScheduler(api);
    this.images = {
      fails: (image) => this.failingImages.has(image) || image.includes('does-not-exist'),
      present: (image) => this.pulledImages.has(image),
      pulled: (image) => {
        this.pulledImages.add(image);
      },
    };
  }

  /** Attaches to the API server (deletions become graceful, logs come from here), schedules and runs its pods. */
  start(): void {
    if (this.unsubscribe) return;
    this.api.attachKubelet(this);
    this.unsubscribe = this.api.on('pod', (type, pod) => this.observe(type, pod));
    this.scheduler?.start();
    for (const pod of this.api.pods()) this.observe('ADDED', pod);
  }

  /** SIGKILLs every process it started and waits for them; the pods stay in the API as they were. */
  async stop(): Promise<void> {
    this.unsubscribe?.();
    this.unsubscribe = null;
    this.scheduler?.stop();
    this.api.detachKubelet(this);
    const pods = [...this.running.values()];
    this.running.clear();
    await Promise.all(pods.map((pod) => pod.kill()));
  }

  /** Pulls of this image fail (ErrImagePull, then ImagePullBackOff, retried) until `failImagePull(null)`; images naming `does-not-exist` always fail. */
  failImagePull(image: string | null): void {
    if (image === null) this.failingImages.clear();
    else this.failingImages.add(image);
  }

  allowImagePull(image: string): void {
    this.failingImages.delete(image);
  }

  /** More environment for agents started from now on (e.g. a bad setting that makes them exit). */
  setAgentEnv(env: Readonly<Record<string, string>>): void {
    this.extraAgentEnv = { ...env };
  }

  /** The process of a pod's container (default `agent`), e.g. to kill it as a crash would. */
  processOf(podName: string, container = 'agent', namespace?: string): ChildProcess | undefined {
    const pod = [...this.running.values()].find((candidate) => candidate.name === podName && (namespace === undefined || candidate.namespace === namespace));
    return pod?.processOf(container);
  }

  logs(namespace: string, pod: string, container: string, previous: boolean): Array<{ time: string; line: string }> | undefined {
    return this.running.get(`${namespace}/${pod}`)?.logs(container, previous);
  }

  private observe(type: WatchEventType, pod: V1Pod): void {
    const namespace = pod.metadata!.namespace!;
    const name = pod.metadata!.name!;
    const key = `${namespace}/${name}`;
    let worker = this.running.get(key);
    if (worker && worker.uid !== pod.metadata?.uid) {
      // Another pod of that name: the one we ran is gone.
      this.running.delete(key);
      void worker.kill();
      worker = undefined;
    }
    if (type === 'DELETED') {
      if (worker) {
        // Gone without us (forced, its node removed) or after we finished it: nothing of it may run on.
        this.running.delete(key);
        void worker.kill();
      }
      return;
    }
    if (pod.metadata?.deletionTimestamp) {
      const grace = pod.metadata.deletionGracePeriodSeconds ?? pod.spec?.terminationGracePeriodSeconds ?? 30;
      if (worker) worker.terminate(grace);
      else this.api.deletePodNow(namespace, name);
      return;
    }
    const phase = pod.status?.phase;
    if (worker || !pod.spec?.nodeName || !this.api.node(pod.spec.nodeName) || phase === 'Succeeded' || phase === 'Failed') return;
    const started = new KubeletPod(this.api, pod, {
      restartBackoffMs: this.options.restartBackoffMs ?? 50,
      maxRestartBackoffMs: this.options.maxRestartBackoffMs ?? 1_000,
      imagePullBackoffMs: this.options.imagePullBackoffMs ?? this.options.restartBackoffMs ?? 50,
      graceScale: this.options.graceScale ?? 1,
      simulatedContainers: new Set(this.options.simulatedContainers ?? ['engine']),
      agentEnv: () => ({ ...this.options.agentEnvOverrides, ...this.extraAgentEnv }),
      images: this.images,
    }, () => {
      if (this.running.get(key) === started) this.running.delete(key);
    });
    this.running.set(key, started);
    started.start();
  }
}
