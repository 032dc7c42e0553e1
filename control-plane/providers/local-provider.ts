import { spawn, type ChildProcess } from 'node:child_process';
import { agentDrainTimeoutMs } from '../../common/agent-drain';
import { loraAgentEnv } from '../deployments/lora-settings';
import type { Logger } from 'pino';
import type { AgentEngineKind } from '../../common/engine-kinds';
import type { GpuOffer } from '../replicas/gpu-offer';
import type { Deployment } from '../deployments/deployment.entity';
import type { Replica } from '../replicas/replica.entity';
import type { CapacityProvider } from '../replicas/capacity-provider';
import type { ReplicaLogOwner } from '../replicas/replica-logs';
import { relayAgentLine } from './agent-log-line';

export interface LocalProviderOptions {
  /** `host:port` the spawned agents dial. */
  controlPlaneAddress: () => string;
  agentEntry: string;
  engine: AgentEngineKind;
  engineUrl?: string;
  /** Concurrency of a deployment's agents (text engines batch many requests; a diffusion model runs one or two). */
  maxConcurrency: (deployment: Deployment) => number;
  restartDelayMs: number;
  /**
   * How long an agent given back (scale-down, pause, delete) has in all (the Drain it was sent,
   * then SIGTERM, which also drains) before SIGKILL. Default: the agent's own drain timeout
   * (WORKER_DRAIN_TIMEOUT_MS, 30 s) and `stopMarginMs`, so the requests it serves finish: a
   * fixed 10 s killed a replica that still streamed a request queued on it.
   */
  stopTimeoutMs?: number;
  /** What an agent has beyond its drain timeout to end its stream and exit. @default 5000 */
  stopMarginMs?: number;
  /** How long each agent has when the server itself stops (stopAll), before SIGKILL. @default 10000 */
  shutdownTimeoutMs?: number;
  extraEnv?: Record<string, string>;
  /** Node flags for agent processes (e.g. `--cpu-prof`, which NODE_OPTIONS may not carry). */
  nodeArgs?: readonly string[];
  /** Engine variables of one deployment's agents over the defaults (a local GGUF model's agents run llama-cpp). */
  engineEnv?: (deployment: Deployment) => Record<string, string>;
  /**
   * CPU-engine agents act out a model download this long (WORKER_CPU_LOAD_MS), reporting progress.
   * With `sharedModelCache` (one machine) only a model's first agent downloads; without it (every
   * agent a fresh host) each does.
   */
  modelDownloadMs?: number;
  sharedModelCache?: boolean;
  /**
   * Told when an agent exits on its own, with how and the last line it printed (shown on the
   * replica), and when it will be started again (unless the replica is ended meanwhile).
   */
  onAgentExit?: (replicaId: string, reason: string, restartInMs: number) => void;
  /** Told of every line an agent prints, with its replica (the replica's log: replicas/replica-logs.ts). */
  onAgentLine?: (owner: ReplicaLogOwner, text: string) => void;
  /** What this machine offers placement: one offer, as many replicas as wanted. */
  offer?: { gpuName: string; gpuMemoryGb: number; pricePerHour: number };
  /** The clock in milliseconds an agent's run is timed by (a short run counts as a crash). @default Date.now */
  now?: () => number;
}

interface LocalAgent {
  child: ChildProcess;
  /** The drain timeout its environment gives it (WORKER_DRAIN_TIMEOUT_MS). */
  drainTimeoutMs: number;
  lastLine: string;
  wanted: boolean;
  /** Consecutive quick exits: the restart delay doubles with each, up to 30 s. */
  crashes: number;
  start: () => void;
}

const MAX_RESTART_DELAY_MS = 30_000;
/** An agent that ran this long before exiting is not crash-looping. */
const HEALTHY_RUN_MS = 10_000;

/**
 * Runs each replica as a worker-agent child process on this machine. An agent that dies
 * unexpectedly is started again after `restartDelayMs` with the same join token, so it
 * rejoins as the same replica. Agents live no longer than this process: each watches a pipe
 * from it (WORKER_EXIT_WITH_PARENT) and exits when it closes, a kill -9 of the server included.
 */
export class LocalProvider implements CapacityProvider {
  readonly kind = 'local';
  private readonly agents = new Map<string, LocalAgent>();
  /** Agents given back and still draining (stopAll waits for them too). */
  private readonly draining = new Set<ChildProcess>();
  /** Models whose simulated download already happened on this machine. */
  private readonly downloaded = new Set<string>();

  private readonly now: () => number;

  constructor(private readonly options: LocalProviderOptions, private readonly logger: Logger) {
    this.now = options.now ?? Date.now;
  }

  async offers(): Promise<GpuOffer[]> {
    const offer = this.options.offer ?? { gpuName: 'cpu', gpuMemoryGb: 80, pricePerHour: 0 };
    return [{ id: 'local', provider: 'local', region: 'local', available: Infinity, ...offer }];
  }

  async launch(_offer: GpuOffer, deployment: Deployment, replica: Replica, joinToken: string): Promise<void> {
    this.start(deployment, replica, joinToken, {});
  }

  /** Runs the replica's agent as a child process (the market provider's simulated hosts use this too). */
  start(deployment: Deployment, replica: Replica, joinToken: string, extraEnv: Record<string, string>): void {
    const agent: LocalAgent = { child: undefined as unknown as ChildProcess, drainTimeoutMs: 0, lastLine: '', wanted: true, crashes: 0, start: () => {} };
    agent.start = () => {
      const startedAt = this.now();
      const env = { ...this.downloadEnv(deployment.modelId), ...loraAgentEnv(deployment), ...this.options.engineEnv?.(deployment), ...extraEnv };
      agent.drainTimeoutMs = agentDrainTimeoutMs({ ...this.options.extraEnv, ...env });
      const owner: ReplicaLogOwner = { replicaId: replica.id, deploymentId: deployment.id, workspaceId: deployment.workspaceId };
      agent.child = this.spawnAgent(owner, joinToken, this.options.maxConcurrency(deployment), env, (line) => (agent.lastLine = line));
      agent.child.once('exit', (code, signal) => {
        if (!agent.wanted) return;
        agent.crashes = this.now() - startedAt > HEALTHY_RUN_MS ? 0 : agent.crashes + 1;
        const delayMs = Math.min(MAX_RESTART_DELAY_MS, this.options.restartDelayMs * 2 ** Math.max(0, agent.crashes - 1));
        // SIGABRT is a native assertion (llama.cpp aborts on some malformed model files): its
        // last line is the assertion, so say what kind of death it was.
        const how = signal === 'SIGABRT' || code === 134 ? 'aborted in native code (SIGABRT, e.g. llama.cpp on a malformed model file)' : signal ? `killed by ${signal}` : `exited with code ${code}`;
        this.options.onAgentExit?.(replica.id, `agent ${how}${agent.lastLine ? `: ${agent.lastLine}` : ''}`, delayMs);
        this.logger.warn({ replicaId: replica.id, deploymentId: deployment.id, code, signal, delayMs }, 'local agent exited; restarting');
        setTimeout(() => agent.wanted && agent.start(), delayMs).unref();
      });
    };
    this.agents.set(replica.id, agent);
    agent.start();
  }

  /** The engine this provider's agents of a deployment run: WORKER_ENGINE as `spawnAgent` will set it. */
  engineOf(deployment: Deployment): string {
    return this.options.engineEnv?.(deployment).WORKER_ENGINE ?? this.options.extraEnv?.WORKER_ENGINE ?? this.options.engine;
  }

  private downloadEnv(modelId: string): Record<string, string> {
    const downloadMs = this.options.modelDownloadMs ?? 0;
    if (downloadMs <= 0 || this.downloaded.has(modelId)) return {};
    if (this.options.sharedModelCache) this.downloaded.add(modelId);
    return { WORKER_CPU_LOAD_MS: String(downloadMs) };
  }

  /**
   * Sends the replica's agent on its way (Drain, then SIGTERM, then SIGKILL at the stop timeout)
   * and returns without waiting for it to finish what it serves: a capacity pass that gives back
   * a replica must not stall every other deployment's decisions for a drain (as a pod's deletion
   * returns while the pod drains). stopAll waits for agents still draining.
   */
  async terminate(replicaId: string): Promise<void> {
    const agent = this.agents.get(replicaId);
    if (!agent) return;
    agent.wanted = false;
    this.agents.delete(replicaId);
    this.draining.add(agent.child);
    void stopChild(agent.child, this.options.stopTimeoutMs ?? agent.drainTimeoutMs + (this.options.stopMarginMs ?? 5_000)).finally(() => this.draining.delete(agent.child));
  }

  /** The server stops: its agents, and those still draining, get a short drain (its clients' connections end with it anyway). */
  async stopAll(): Promise<void> {
    const children = [...[...this.agents.values()].map((agent) => {
      agent.wanted = false;
      return agent.child;
    }), ...this.draining];
    this.agents.clear();
    await Promise.all(children.map((child) => stopChild(child, this.options.shutdownTimeoutMs ?? 10_000)));
  }

  /** Last resort on a forced exit: agents must not outlive the server that spawned them. */
  killAll(): void {
    for (const agent of this.agents.values()) {
      agent.wanted = false;
      agent.child.kill('SIGKILL');
    }
  }

  /** The agent process of a replica (tests kill it to simulate a crashed host). */
  processOf(replicaId: string): ChildProcess | undefined {
    return this.agents.get(replicaId)?.child;
  }

  private spawnAgent(owner: ReplicaLogOwner, joinToken: string, maxConcurrency: number, extraEnv: Record<string, string>, onLine: (line: string) => void): ChildProcess {
    const { replicaId } = owner;
    const env: NodeJS.ProcessEnv = {
      PATH: process.env.PATH,
      NODE_ENV: process.env.NODE_ENV,
      WORKER_CONTROL_PLANE: this.options.controlPlaneAddress(),
      WORKER_JOIN_TOKEN: joinToken,
      WORKER_AGENT_ID: `agt_local_${replicaId.slice(4, 16)}`,
      WORKER_ENGINE: this.options.engine,
      WORKER_MAX_CONCURRENCY: String(maxConcurrency),
      // The agent watches its stdin, a pipe whose other end this process holds and never closes:
      // when the server dies, however it dies, its agents exit at once instead of living on as
      // strays that redial this address (common/parent-pipe.ts).
      WORKER_EXIT_WITH_PARENT: 'true',
      ...(this.options.engineUrl ? { WORKER_ENGINE_URL: this.options.engineUrl } : {}),
      ...this.options.extraEnv,
      ...extraEnv,
    };
    const child = spawn(process.execPath, [...(this.options.nodeArgs ?? []), this.options.agentEntry], { env, stdio: ['pipe', 'pipe', 'pipe'] });
    const log = this.logger.child({ replicaId, pid: child.pid });
    let plainSeen = false;
    const forward = (chunk: Buffer) => {
      for (const line of chunk.toString('utf8').split('\n')) {
        const text = line.trim();
        if (!text) continue;
        // An agent's last words are plain lines (a failed start, a native abort, a crash);
        // its JSON log records, which go on while it connects, must not bury them.
        const plain = !text.startsWith('{');
        if (plain || !plainSeen) onLine(text.slice(0, 500));
        plainSeen ||= plain;
        relayAgentLine(log, text);
        this.options.onAgentLine?.(owner, text);
      }
    };
    child.stdout?.on('data', forward);
    child.stderr?.on('data', forward);
    return child;
  }
}

/**
 * A replica being ended was just sent Drain over its stream; Jobs assigned right before it are
 * in the same stream. A SIGTERM sent at once can be handled before the agent reads them: it
 * then drains with nothing in flight, ends its stream, and those jobs fail as if the host had
 * crashed (a 502 in the middle of a graceful rolling restart). So the agent first gets this long
 * to act on the Drain and leave by itself; SIGTERM only follows for one that has not.
 */
const DRAIN_NOTICE_MS = 1_000;

async function stopChild(child: ChildProcess, timeoutMs: number): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  await new Promise<void>((resolve) => {
    const notice = setTimeout(() => child.kill('SIGTERM'), Math.min(DRAIN_NOTICE_MS, timeoutMs));
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.once('exit', () => {
      clearTimeout(notice);
      clearTimeout(timer);
      resolve();
    });
  });
}
