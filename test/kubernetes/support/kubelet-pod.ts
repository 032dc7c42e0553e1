/**
 * One pod on the test kubelet: its init containers in order, then its containers, each through
 * the kubelet's steps and in its words — the image pull (ErrImagePull, then ImagePullBackOff,
 * retried), the environment (Secret references resolved; CreateContainerConfigError while one is
 * missing, retried), the start (Created, Started), the exit (Completed or Error; a termination
 * message from the logs only with `terminationMessagePolicy: FallbackToLogsOnError`, as a real
 * kubelet), restarts by the pod's restartPolicy with the kubelet's doubling back-off
 * (CrashLoopBackOff), and deletion (Killing, SIGTERM, SIGKILL after the grace period, then the
 * pod removed). Containers are real processes on this machine, each in its own process group
 * (its "container": SIGKILL and the end of the main process take everything in it), with the
 * pod's emptyDir volumes as temporary folders.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { V1Container, V1ContainerStatus, V1Pod } from '@kubernetes/client-node';
import type { FakeKubeApi } from './fake-kube-api';
import { kubeTime } from './fake-kube-resources';
import { fetchAgent } from './fetch-agent';
import { composePodStatus } from './pod-status';

export interface KubeletPodSettings {
  /** First restart back-off (10 s on a real kubelet), doubling up to `maxRestartBackoffMs` (5 min). */
  readonly restartBackoffMs: number;
  readonly maxRestartBackoffMs: number;
  /** How long a failed pull shows ErrImagePull before ImagePullBackOff (the back-off then doubles as restarts do). */
  readonly imagePullBackoffMs: number;
  /** Grace periods are multiplied by this (tests do not wait 120 s). */
  readonly graceScale: number;
  /** Containers not run but reported running and ready (the engine: the agent's CPU engine stands in for it). */
  readonly simulatedContainers: ReadonlySet<string>;
  /** Environment laid over the `agent` container's when it starts (after WORKER_ENGINE_URL is dropped). */
  readonly agentEnv: () => Readonly<Record<string, string>>;
  readonly images: ImageCache;
}

export interface ImageCache {
  /** Pulls of this image fail (not found). */
  fails(image: string): boolean;
  /** The image was pulled on this machine before (IfNotPresent then does not pull again). */
  present(image: string): boolean;
  pulled(image: string): void;
}

interface LogLine {
  readonly time: string;
  readonly line: string;
}

/** Container states in their wire form (RFC 3339 strings). */
interface WireState {
  waiting?: { reason: string; message?: string };
  running?: { startedAt: string };
  terminated?: { exitCode: number; signal?: number; reason: string; message?: string; startedAt?: string; finishedAt: string; containerID?: string };
}

interface ContainerRun {
  readonly spec: V1Container;
  readonly init: boolean;
  state: WireState;
  lastState: WireState;
  ready: boolean;
  started: boolean;
  restartCount: number;
  containerID?: string;
  imageID: string;
  /** Running now: a process, the agent download, or a simulated container. */
  running: boolean;
  /** Reported running without a process (see `startContainer`). */
  simulated: boolean;
  process: ChildProcess | null;
  startedAt?: string;
  startedAtMs: number;
  logs: LogLine[];
  previousLogs?: LogLine[];
  backoffStep: number;
  pullStep: number;
}

const MAX_LOG_LINES = 1_000;
/** The kubelet's FallbackToLogsOnError: the last 80 lines, at most 2 KiB. */
const TERMINATION_LOG_LINES = 80;
const TERMINATION_LOG_BYTES = 2_048;
/** A real kubelet's first back-off and ceiling, for the messages (`back-off 40s restarting …`). */
const REAL_BACKOFF_SECONDS = 10;
const REAL_MAX_BACKOFF_SECONDS = 300;

export class KubeletPod {
  readonly namespace: string;
  readonly name: string;
  readonly uid: string;
  private readonly node: string;
  private readonly spec: NonNullable<V1Pod['spec']>;
  private readonly dir: string;
  private readonly volumes = new Map<string, string>();
  private readonly inits: ContainerRun[];
  private readonly containers: ContainerRun[];
  private readonly timers = new Set<NodeJS.Timeout>();
  private readonly downloads = new Set<AbortController>();
  private readonly startTime = kubeTime();
  private terminating = false;
  /** Gone from the API or the kubelet stopping: no more status writes. */
  private killed = false;
  private finished = false;
  private killTimer: NodeJS.Timeout | undefined;
  private killDeadline = Number.POSITIVE_INFINITY;
  private lastStatus = '';

  constructor(private readonly api: FakeKubeApi, pod: V1Pod, private readonly settings: KubeletPodSettings, private readonly onFinished: () => void) {
    this.namespace = pod.metadata!.namespace!;
    this.name = pod.metadata!.name!;
    this.uid = pod.metadata!.uid!;
    this.node = pod.spec!.nodeName!;
    this.spec = structuredClone(pod.spec!);
    this.dir = fs.mkdtempSync(path.join(os.tmpdir(), `kubelet-${this.name.slice(0, 40)}-`));
    const run = (spec: V1Container, init: boolean): ContainerRun => ({
      spec, init, state: { waiting: { reason: 'PodInitializing' } }, lastState: {}, ready: false, started: false, restartCount: 0, imageID: '',
      running: false, simulated: false, process: null, startedAtMs: 0, logs: [], backoffStep: 0, pullStep: 0,
    });
    this.inits = (this.spec.initContainers ?? []).map((spec) => run(spec, true));
    this.containers = this.spec.containers.map((spec) => run(spec, false));
  }

  start(): void {
    for (const volume of this.spec.volumes ?? []) {
      // Every volume is an empty folder here (emptyDir is all the provider's pods use).
      const folder = path.join(this.dir, 'volumes', volume.name);
      fs.mkdirSync(folder, { recursive: true });
      this.volumes.set(volume.name, folder);
    }
    this.publish();
    this.runInit(0);
  }

  /** The pod's deletion: SIGTERM now, SIGKILL when the (scaled) grace period ends; a shorter one given later wins. */
  terminate(graceSeconds: number): void {
    const deadline = Date.now() + graceSeconds * 1000 * this.settings.graceScale;
    if (this.terminating) {
      if (deadline < this.killDeadline) this.armKill(deadline);
      return;
    }
    this.terminating = true;
    this.clearTimers();
    for (const download of this.downloads) download.abort();
    for (const run of [...this.inits, ...this.containers]) {
      if (!run.running) continue;
      this.event('Normal', 'Killing', `Stopping container ${run.spec.name}`, run);
      if (run.process?.pid !== undefined) {
        // SIGTERM goes to the container's main process only, as the runtime sends it.
        run.process.kill('SIGTERM');
      } else if (run.simulated) {
        run.running = false;
        run.ready = false;
        run.state = { terminated: { exitCode: 0, reason: 'Completed', startedAt: run.startedAt, finishedAt: kubeTime(), containerID: run.containerID } };
      }
    }
    this.armKill(deadline);
    this.publish();
    this.finishIfStopped();
  }

  /** The pod is gone (or the kubelet stops): everything is SIGKILLed; resolves once every process exited. */
  async kill(): Promise<void> {
    this.killed = true;
    this.terminating = true;
    this.clearTimers();
    clearTimeout(this.killTimer);
    for (const download of this.downloads) download.abort();
    const exits: Array<Promise<void>> = [];
    for (const run of [...this.inits, ...this.containers]) {
      const child = run.process;
      if (!child || child.exitCode !== null || child.signalCode !== null) continue;
      exits.push(new Promise((resolve) => child.once('close', () => resolve())));
      killGroup(child, 'SIGKILL');
    }
    await Promise.all(exits);
    fs.rmSync(this.dir, { recursive: true, force: true });
  }

  processOf(container: string): ChildProcess | undefined {
    return [...this.containers, ...this.inits].find((run) => run.spec.name === container)?.process ?? undefined;
  }

  logs(container: string, previous: boolean): LogLine[] | undefined {
    const run = [...this.containers, ...this.inits].find((candidate) => candidate.spec.name === container);
    if (!run) return undefined;
    if (previous) return run.previousLogs && [...run.previousLogs];
    return run.containerID ? [...run.logs] : undefined;
  }

  // ---- init containers, then containers -----------------------------------------------------

  private runInit(index: number): void {
    if (this.terminating) return;
    const run = this.inits[index];
    if (!run) {
      this.publish();
      for (const container of this.containers) this.startContainer(container);
      return;
    }
    if (!this.pull(run, () => this.runInit(index))) return;
    const env = this.environment(run);
    if (typeof env === 'string') return this.configError(run, env, () => this.runInit(index));
    this.markStarted(run);
    const next = () => this.runInit(index + 1);
    const again = () => this.runInit(index);
    if (run.spec.name !== 'fetch-agent') {
      // Other init containers' images are not run here: they complete at once.
      this.exited(run, 0, null, undefined, next, again);
      return;
    }
    const download = new AbortController();
    this.downloads.add(download);
    const file = env.AGENT_FILE || '/agent/worker-agent';
    const target = this.hostPath(run, file) ?? path.join(this.dir, path.basename(file));
    void fetchAgent(env, target, download.signal).then((result) => {
      this.downloads.delete(download);
      for (const line of result.output) this.log(run, line);
      this.exited(run, result.exitCode, null, undefined, next, again);
    });
  }

  private startContainer(run: ContainerRun): void {
    if (this.terminating) return;
    if (!this.pull(run, () => this.startContainer(run))) return;
    if (this.settings.simulatedContainers.has(run.spec.name)) {
      // Not run: the test engine lives inside the agent (WORKER_ENGINE=cpu), so the engine
      // container is reported running and ready (its probes are not played).
      this.markStarted(run);
      run.simulated = true;
      this.publish();
      return;
    }
    const env = this.environment(run);
    if (typeof env === 'string') return this.configError(run, env, () => this.startContainer(run));
    const command = [...(run.spec.command ?? []), ...(run.spec.args ?? [])].map((part) => expand(part, env));
    if (command.length === 0) {
      // The image's entrypoint is unknown here: reported running, as a simulated container.
      this.markStarted(run);
      run.simulated = true;
      this.publish();
      return;
    }
    this.markStarted(run);
    this.spawnProcess(run, command, env);
    this.publish();
  }

  private spawnProcess(run: ContainerRun, command: string[], env: Record<string, string>): void {
    const executable = this.hostPath(run, command[0]) ?? command[0];
    const cwd = (run.spec.workingDir && this.hostPath(run, run.spec.workingDir)) || this.dir;
    const child = spawn(executable, command.slice(1), { cwd, env, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    run.process = child;
    for (const stream of [child.stdout!, child.stderr!]) {
      let partial = '';
      stream.setEncoding('utf8');
      stream.on('data', (chunk: string) => {
        const lines = (partial + chunk).split('\n');
        partial = lines.pop() ?? '';
        for (const line of lines) this.log(run, line);
      });
      stream.on('end', () => {
        if (partial) this.log(run, partial);
        partial = '';
      });
    }
    let done = false;
    const finish = (exitCode: number, signal: NodeJS.Signals | null, startError?: string) => {
      if (done) return;
      done = true;
      run.process = null;
      this.exited(run, exitCode, signal, startError, undefined, () => this.startContainer(run));
    };
    // The main process ended: whatever it left in its "container" goes with it.
    child.once('exit', () => killGroup(child, 'SIGKILL'));
    child.once('error', (error: NodeJS.ErrnoException) => finish(128, null, startErrorMessage(command[0], error)));
    child.once('close', (code, signal) => finish(code ?? 128 + (signal ? os.constants.signals[signal] : 0), signal));
  }

  // ---- the kubelet's steps ------------------------------------------------------------------

  /** The image is there (pulled now or before); false while its pull fails (retried by `retry`). */
  private pull(run: ContainerRun, retry: () => void): boolean {
    const image = run.spec.image!;
    const reference = normaliseImage(image);
    if (this.settings.images.fails(image)) {
      const error = `rpc error: code = NotFound desc = failed to pull and unpack image "${reference}": failed to resolve reference "${reference}": ${reference}: not found`;
      run.pullStep += 1;
      this.event('Normal', 'Pulling', `Pulling image "${image}"`, run);
      this.event('Warning', 'Failed', `Failed to pull image "${image}": ${error}`, run);
      this.event('Warning', 'Failed', 'Error: ErrImagePull', run);
      run.state = { waiting: { reason: 'ErrImagePull', message: error } };
      this.publish();
      this.after(this.settings.imagePullBackoffMs, () => {
        run.state = { waiting: { reason: 'ImagePullBackOff', message: `Back-off pulling image "${image}": ErrImagePull: ${error}` } };
        this.event('Normal', 'BackOff', `Back-off pulling image "${image}"`, run);
        this.event('Warning', 'Failed', 'Error: ImagePullBackOff', run);
        this.publish();
        this.after(this.backoff(run.pullStep), retry);
      });
      return false;
    }
    run.pullStep = 0;
    if (run.spec.imagePullPolicy !== 'Always' && this.settings.images.present(image)) {
      this.event('Normal', 'Pulled', `Container image "${image}" already present on machine`, run);
    } else {
      this.event('Normal', 'Pulling', `Pulling image "${image}"`, run);
      this.event('Normal', 'Pulled', `Successfully pulled image "${image}" in 0s (0s including waiting). Image size: 0 bytes.`, run);
      this.settings.images.pulled(image);
    }
    run.imageID = `${reference.replace(/:[^/:@]+$/, '')}@sha256:${crypto.createHash('sha256').update(reference).digest('hex')}`;
    return true;
  }

  private configError(run: ContainerRun, message: string, retry: () => void): void {
    run.state = { waiting: { reason: 'CreateContainerConfigError', message } };
    this.event('Warning', 'Failed', `Error: ${message}`, run);
    this.publish();
    this.after(this.settings.restartBackoffMs, retry);
  }

  private markStarted(run: ContainerRun): void {
    run.containerID = `containerd://${crypto.randomBytes(32).toString('hex')}`;
    run.startedAt = kubeTime();
    run.startedAtMs = Date.now();
    run.running = true;
    run.started = true;
    run.ready = !run.init;
    run.state = { running: { startedAt: run.startedAt } };
    this.event('Normal', 'Created', `Created container: ${run.spec.name}`, run);
    this.event('Normal', 'Started', `Started container ${run.spec.name}`, run);
  }

  /** A container ended: next step, restart (with back-off) or stay ended, by the pod's restartPolicy. */
  private exited(run: ContainerRun, exitCode: number, signal: NodeJS.Signals | null, startError: string | undefined, onSuccess: (() => void) | undefined, restart: () => void): void {
    run.running = false;
    run.ready = run.init && exitCode === 0;
    run.started = false;
    const message = startError ?? this.terminationMessage(run, exitCode);
    const terminated = {
      exitCode, ...(signal ? { signal: os.constants.signals[signal] } : {}), reason: startError ? 'StartError' : exitCode === 0 ? 'Completed' : 'Error',
      ...(message ? { message } : {}), startedAt: run.startedAt, finishedAt: kubeTime(), containerID: run.containerID,
    };
    if (this.terminating) {
      run.state = { terminated };
      if (!this.killed) this.publish();
      this.finishIfStopped();
      return;
    }
    const policy = this.spec.restartPolicy ?? 'Always';
    if (run.init && exitCode === 0 && onSuccess) {
      run.state = { terminated };
      this.publish();
      onSuccess();
      return;
    }
    const restarts = run.init ? policy !== 'Never' : policy === 'Always' || (policy === 'OnFailure' && exitCode !== 0);
    if (!restarts) {
      run.state = { terminated };
      this.publish();
      return;
    }
    // The back-off starts over once a container ran well past the longest back-off.
    if (Date.now() - run.startedAtMs > 2 * this.settings.maxRestartBackoffMs) run.backoffStep = 0;
    const step = run.backoffStep;
    run.backoffStep += 1;
    if (step === 0) {
      // The first restart comes at once; its ending shows until then.
      run.state = { terminated };
      this.publish();
      this.after(0, () => this.restart(run, restart));
      return;
    }
    run.lastState = { terminated };
    run.state = { waiting: { reason: 'CrashLoopBackOff', message: `back-off ${realBackoff(step)} restarting failed container=${run.spec.name} pod=${this.name}_${this.namespace}(${this.uid})` } };
    this.event('Warning', 'BackOff', `Back-off restarting failed container ${run.spec.name} in pod ${this.name}_${this.namespace}(${this.uid})`, run);
    this.publish();
    this.after(this.backoff(step), () => this.restart(run, restart));
  }

  private restart(run: ContainerRun, restart: () => void): void {
    if (run.state.terminated) run.lastState = { terminated: run.state.terminated };
    run.restartCount += 1;
    run.previousLogs = run.logs;
    run.logs = [];
    restart();
  }

  /** Only with FallbackToLogsOnError does a failed container's output become its message (the default policy reads /dev/termination-log, which nothing here writes). */
  private terminationMessage(run: ContainerRun, exitCode: number): string | undefined {
    if (run.spec.terminationMessagePolicy !== 'FallbackToLogsOnError' || exitCode === 0) return undefined;
    let text = run.logs.slice(-TERMINATION_LOG_LINES).map((entry) => entry.line).join('\n');
    while (Buffer.byteLength(text) > TERMINATION_LOG_BYTES) text = text.slice(text.indexOf('\n') + 1 || 1);
    return text || undefined;
  }

  /** The container's environment with references resolved, or why it cannot be made (CreateContainerConfigError). */
  private environment(run: ContainerRun): Record<string, string> | string {
    const resolved: Record<string, string> = {};
    for (const variable of run.spec.env ?? []) {
      const source = variable.valueFrom;
      if (!source) {
        resolved[variable.name] = expand(variable.value ?? '', resolved);
        continue;
      }
      if (source.secretKeyRef) {
        const { name, key, optional } = source.secretKeyRef;
        const secret = this.api.secret(this.namespace, name!);
        if (!secret) {
          if (optional) continue;
          return `secret "${name}" not found`;
        }
        const value = secret.data?.[key];
        if (value === undefined) {
          if (optional) continue;
          return `couldn't find key ${key} in Secret ${this.namespace}/${name}`;
        }
        resolved[variable.name] = Buffer.from(value, 'base64').toString('utf8');
      } else if (source.configMapKeyRef) {
        if (source.configMapKeyRef.optional) continue;
        return `configmap "${source.configMapKeyRef.name}" not found`;
      } else if (source.fieldRef) {
        resolved[variable.name] = this.fieldRef(source.fieldRef.fieldPath);
      }
    }
    // Only PATH and HOME come from this machine: the container sees its own environment, not the test's.
    const env: Record<string, string> = { PATH: process.env.PATH ?? '/usr/local/bin:/usr/bin:/bin', HOME: process.env.HOME ?? '/root', HOSTNAME: this.name, ...resolved };
    if (run.spec.name === 'agent') {
      // The agent runs on this machine: a variable naming a path under one of its volume mounts
      // (WORKER_MODEL_CACHE_DIR) names that volume's folder here.
      for (const [name, value] of Object.entries(resolved)) env[name] = (value.startsWith('/') && this.hostPath(run, value)) || value;
      // The engine container is not run: its URL means nothing here (the overrides bring the CPU engine).
      delete env.WORKER_ENGINE_URL;
      Object.assign(env, this.settings.agentEnv());
    }
    return env;
  }

  private fieldRef(fieldPath: string): string {
    const pod = this.api.pod(this.namespace, this.name);
    const labels = /^metadata\.labels\['(.+)'\]$/.exec(fieldPath);
    if (labels) return pod?.metadata?.labels?.[labels[1]] ?? '';
    const values: Record<string, string> = {
      'metadata.name': this.name, 'metadata.namespace': this.namespace, 'metadata.uid': this.uid, 'spec.nodeName': this.node,
      'spec.serviceAccountName': this.spec.serviceAccountName ?? 'default', 'status.podIP': '127.0.0.1', 'status.hostIP': '127.0.0.1',
    };
    return values[fieldPath] ?? '';
  }

  /** A path in the container, on this machine: under one of its volume mounts (the longest that holds it). */
  private hostPath(run: ContainerRun, containerPath: string): string | undefined {
    const mounts = [...(run.spec.volumeMounts ?? [])].sort((a, b) => b.mountPath.length - a.mountPath.length);
    for (const mount of mounts) {
      const base = mount.mountPath.replace(/\/+$/, '');
      if (containerPath !== base && !containerPath.startsWith(`${base}/`)) continue;
      const folder = this.volumes.get(mount.name);
      if (folder) return path.join(folder, mount.subPath ?? '', containerPath.slice(base.length));
    }
    return undefined;
  }

  // ---- status and events --------------------------------------------------------------------

  private publish(): void {
    if (this.killed) return;
    const current = this.api.pod(this.namespace, this.name);
    if (!current || current.metadata?.uid !== this.uid) return;
    const status = composePodStatus({
      restartPolicy: this.spec.restartPolicy ?? 'Always', current: current.status, hostIP: '127.0.0.1', podIP: '127.0.0.1', startTime: this.startTime,
      initContainerStatuses: this.inits.map((run) => containerStatus(run)), containerStatuses: this.containers.map((run) => containerStatus(run)),
      terminated: this.finished,
    });
    const text = JSON.stringify(status);
    if (text === this.lastStatus) return;
    this.lastStatus = text;
    this.api.updatePodStatus(this.namespace, this.name, status);
  }

  private event(type: 'Normal' | 'Warning', reason: string, message: string, run?: ContainerRun): void {
    if (this.killed) return;
    this.api.recordEvent({
      namespace: this.namespace, type, reason, message, component: 'kubelet', host: this.node,
      involvedObject: { kind: 'Pod', name: this.name, uid: this.uid, ...(run ? { fieldPath: `spec.${run.init ? 'initContainers' : 'containers'}{${run.spec.name}}` } : {}) },
    });
  }

  private log(run: ContainerRun, line: string): void {
    run.logs.push({ time: new Date().toISOString(), line });
    if (run.logs.length > MAX_LOG_LINES) run.logs.splice(0, run.logs.length - MAX_LOG_LINES);
  }

  // ---- deletion -----------------------------------------------------------------------------

  private armKill(deadline: number): void {
    clearTimeout(this.killTimer);
    this.killDeadline = deadline;
    this.killTimer = setTimeout(() => {
      for (const run of [...this.inits, ...this.containers]) if (run.process) killGroup(run.process, 'SIGKILL');
    }, Math.max(0, deadline - Date.now()));
  }

  /** Every container stopped: the final status (Succeeded or Failed), then the pod goes (the kubelet's delete with grace 0). */
  private finishIfStopped(): void {
    if (!this.terminating || this.finished || this.killed) return;
    if ([...this.inits, ...this.containers].some((run) => run.running) || this.downloads.size > 0) return;
    this.finished = true;
    clearTimeout(this.killTimer);
    this.publish();
    this.api.deletePodNow(this.namespace, this.name);
    fs.rmSync(this.dir, { recursive: true, force: true });
    this.onFinished();
  }

  private backoff(step: number): number {
    return Math.min(this.settings.restartBackoffMs * 2 ** Math.max(0, step - 1), this.settings.maxRestartBackoffMs);
  }

  private after(delayMs: number, action: () => void): void {
    const timer = setTimeout(() => {
      this.timers.delete(timer);
      if (!this.terminating) action();
    }, delayMs);
    this.timers.add(timer);
  }

  private clearTimers(): void {
    for (const timer of this.timers) clearTimeout(timer);
    this.timers.clear();
  }
}

function containerStatus(run: ContainerRun): V1ContainerStatus {
  const status = {
    name: run.spec.name, image: run.spec.image!, imageID: run.imageID, ...(run.containerID ? { containerID: run.containerID } : {}),
    ready: run.ready, restartCount: run.restartCount, started: run.started, state: run.state, lastState: run.lastState,
  };
  // Wire form: times are strings, as the API server sends them (the model's types say Date).
  return status as unknown as V1ContainerStatus;
}

/** SIGKILL (or any signal) to the container's whole process group; it may be gone already. */
function killGroup(child: ChildProcess, signal: NodeJS.Signals): void {
  if (child.pid === undefined) return;
  try {
    process.kill(-child.pid, signal);
  } catch {
    // Already gone.
  }
}

/** `$(VAR)` as Kubernetes expands it in env values, command and args (`$$(VAR)` stays literal; unknown names too). */
function expand(text: string, env: Readonly<Record<string, string>>): string {
  return text.replace(/\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)/g, (match, name: string | undefined) => {
    if (match === '$$') return '$';
    return name !== undefined && Object.prototype.hasOwnProperty.call(env, name) ? env[name] : match;
  });
}

/** `vllm/vllm-openai:v0.11.0` → `docker.io/vllm/vllm-openai:v0.11.0`, `busybox` → `docker.io/library/busybox:latest`. */
function normaliseImage(image: string): string {
  const [first, ...rest] = image.split('/');
  const hasRegistry = rest.length > 0 && (first.includes('.') || first.includes(':') || first === 'localhost');
  let reference = hasRegistry ? image : rest.length === 0 ? `docker.io/library/${image}` : `docker.io/${image}`;
  if (!/[:@][^/]+$/.test(reference.slice(reference.lastIndexOf('/')))) reference += ':latest';
  return reference;
}

/** The real kubelet's back-off for this step, as its message shows it (10s, 20s, 40s, 1m20s, 2m40s, 5m0s). */
function realBackoff(step: number): string {
  const seconds = Math.min(REAL_BACKOFF_SECONDS * 2 ** Math.max(0, step - 1), REAL_MAX_BACKOFF_SECONDS);
  return seconds < 60 ? `${seconds}s` : `${Math.floor(seconds / 60)}m${seconds % 60}s`;
}

function startErrorMessage(command: string, error: NodeJS.ErrnoException): string {
  const cause = error.code === 'ENOENT' ? `stat ${command}: no such file or directory` : error.code === 'EACCES' ? 'permission denied' : error.message;
  return `failed to create containerd task: failed to create shim task: OCI runtime create failed: runc create failed: unable to start container process: exec: "${command}": ${cause}: unknown`;
}
