/**
 * The agent side of `worker.v1` (proto/PROTOCOL.md): dial the control plane, Hello, Welcome or
 * Reject, heartbeats, jobs, Drain, and reconnects with capped full-jitter backoff for as long
 * as the agent lives. The control plane decides; this class executes and reports.
 */
import * as grpc from '@grpc/grpc-js';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  loadWorkerService, PROTOCOL_VERSION,
  type AgentFrame, type ControlFrame, type Gpu, type Hello, type Welcome,
} from '../proto/worker/v1/index';
import { silentLogger, type AgentLogger } from './agent-logger';
import { logAdapterEvents } from './engines/adapter-log';
import { Backoff } from './backoff';
import type { Engine } from './engines/engine';
import { crossesThreshold, engineSignalsFrame, isSignalsPromise, type EngineSignalsAnswer, type EngineSignalsRead } from './engines/engine-signals';
import { EventWriter } from './event-writer';
import { JobRunner } from './job-runner';
import type { Tracing } from '../common/tracing/tracing';
import type { StartupPhases } from './startup-phases';

export interface AgentSessionOptions {
  readonly controlPlaneAddress: string;
  readonly joinToken: string;
  readonly agentId: string;
  readonly maxConcurrency: number;
  readonly reconnectInitialMs: number;
  readonly reconnectMaxMs: number;
  readonly drainTimeoutMs: number;
  readonly gpus: readonly Gpu[];
  /** gRPC keepalive: ping every this many ms while the stream is open. @default 30000 */
  readonly keepaliveIntervalMs?: number;
  /** A ping unanswered this long ends the connection (the agent then reconnects). @default 10000 */
  readonly keepaliveTimeoutMs?: number;
}

export interface AgentSessionDependencies {
  readonly options: AgentSessionOptions;
  readonly engine: Engine;
  readonly agentVersion: string;
  readonly logger?: AgentLogger;
  /** Jitter source for reconnect delays. */
  readonly random?: () => number;
  /** The agent's tracing (OTEL_*); null or absent when off. */
  readonly tracing?: Tracing | null;
  /** The engine's start-up phases, sent on every heartbeat of a stream until one says the engine is ready. */
  readonly startupPhases?: Pick<StartupPhases, 'frames'>;
  /** The models this host's weights cache holds, read for every Hello (model-cache.ts). */
  readonly cachedModels?: () => readonly string[];
  /** Told of every Welcome (the weights cache learns which catalog model its files serve). */
  readonly onWelcome?: (welcome: Welcome) => void;
}

/** How the agent ended: 0 after a drain, 2 when the control plane refused it for good. */
export interface AgentExit {
  readonly exitCode: 0 | 2;
  readonly reason: string;
}

/** Rejections that retrying with the same token and binary cannot fix (PROTOCOL.md). */
const FATAL_REJECTIONS = new Set(['bad_token', 'unsupported_protocol']);
const DEFAULT_HEARTBEAT_INTERVAL_MS = 5_000;
/** On drain, how long queued events may take to leave, and then the control plane to end its side. */
const STREAM_END_GRACE_MS = 2_000;
/** Assign bodies carry whole prompts (images included); gRPC's 4 MiB default is too small. */
const MAX_RECEIVE_MESSAGE_BYTES = 64 * 1024 * 1024;

/**
 * Engine signals read from the engine's own state (in-process engines) are read this often
 * between heartbeats, so a threshold crossing is reported at once; fetched ones (an HTTP
 * engine's /metrics) only once per heartbeat.
 */
const SIGNALS_POLL_MS = 250;
/** How long a heartbeat waits for a fetch of the engine's signals before it goes with the previous ones. */
const SIGNALS_WAIT_MS = 500;
/** A heartbeat sent early (an engine signal crossed a threshold) follows the previous heartbeat by at least this. */
const EARLY_HEARTBEAT_MIN_GAP_MS = 250;

const KEEPALIVE_TIME_MS = 30_000;
const KEEPALIVE_TIMEOUT_MS = 10_000;

type WorkerCall = grpc.ClientDuplexStream<AgentFrame, ControlFrame>;

interface Connection {
  readonly call: WorkerCall;
  readonly writer: EventWriter;
  readonly closed: Promise<void>;
  welcomed: boolean;
  rejection?: { code: string; message: string };
  heartbeat?: NodeJS.Timeout;
  /** Re-reads engine signals between heartbeats (in-process engines). */
  signalsPoll?: NodeJS.Timeout;
  /** An early heartbeat held back by EARLY_HEARTBEAT_MIN_GAP_MS. */
  earlyHeartbeat?: NodeJS.Timeout;
  /** A regular heartbeat waits for the engine's signals: it carries whatever they cross, so no early one is sent. */
  tickPending: boolean;
  lastHeartbeatAt: number;
  /** A heartbeat saying the engine is ready went out on this stream: the start-up phases are not sent again. */
  readySent: boolean;
}

export class AgentSession {
  private readonly service = loadWorkerService();
  private readonly jobs: JobRunner;
  private readonly backoff: Backoff;
  private readonly logger: AgentLogger;
  private readonly stopping = new AbortController();
  private state: 'idle' | 'running' | 'draining' | 'stopped' = 'idle';
  private connection: Connection | undefined;
  private resolveExit!: (exit: AgentExit) => void;
  /** Resolves once the agent has stopped for good; `main` exits with its code. */
  readonly finished = new Promise<AgentExit>((resolve) => { this.resolveExit = resolve; });
  /** The latest Welcome, once the control plane accepted the agent. */
  welcome: Welcome | undefined;
  /** The engine's signals as last read; sent on every heartbeat. */
  private engineSignals: EngineSignalsRead = null;
  /** The engine answered its last signals read from its own state (synchronously): re-read between heartbeats. */
  private signalsLocal = false;

  constructor(private readonly dependencies: AgentSessionDependencies) {
    const { options } = dependencies;
    this.logger = dependencies.logger ?? silentLogger;
    this.jobs = new JobRunner(dependencies.engine, options.maxConcurrency, this.logger, Date.now, dependencies.tracing ?? null);
    this.backoff = new Backoff(options.reconnectInitialMs, options.reconnectMaxMs, dependencies.random);
    // An adapter loaded, failed or was evicted: routing should hear it before the next tick.
    dependencies.engine.adapters?.onChange(() => this.earlyHeartbeat());
    if (dependencies.engine.adapters) logAdapterEvents(dependencies.engine.adapters, this.logger);
  }

  start(): void {
    if (this.state !== 'idle') return;
    this.state = 'running';
    void this.connectLoop();
  }

  /** Drains (new Assigns fail with `agent_draining`, in-flight jobs finish), ends the stream, stops. */
  stop(reason = 'stopped'): Promise<AgentExit> {
    if (this.state === 'idle' || this.state === 'running') {
      this.state = 'draining';
      void this.drainAndEnd(reason);
    }
    return this.finished;
  }

  private async connectLoop(): Promise<void> {
    while (this.state === 'running') {
      const connection = this.connect();
      await connection.closed;
      if (connection.rejection && FATAL_REJECTIONS.has(connection.rejection.code)) {
        this.finish({ exitCode: 2, reason: `refused: ${connection.rejection.code}: ${connection.rejection.message}` });
        return;
      }
      if (this.state !== 'running') return;
      if (connection.welcomed) this.backoff.reset();
      const delayMs = this.backoff.nextDelayMs();
      this.logger.warn({ delayMs, rejection: connection.rejection?.code }, 'stream to the control plane ended; reconnecting');
      await sleep(delayMs, undefined, { signal: this.stopping.signal }).catch(() => undefined);
    }
  }

  private connect(): Connection {
    // A fresh channel per attempt: grpc-js's own channel backoff (up to minutes) would
    // otherwise keep failing calls after the control plane is back.
    const client = new this.service(this.dependencies.options.controlPlaneAddress, grpc.credentials.createInsecure(), {
      'grpc.max_receive_message_length': MAX_RECEIVE_MESSAGE_BYTES,
      // A retry could only replay a Hello on this long-lived stream, and the retry buffer
      // (256 KiB per call) would acknowledge writes before HTTP/2 took them, hiding backpressure.
      'grpc.enable_retries': 0,
      // Heartbeats only tell the control plane that the agent lives; pings tell the agent that
      // the control plane does, so a half-open connection (a partition: no FIN, no RST) is
      // noticed within interval + timeout (~40 s by default), not the minutes TCP takes.
      'grpc.keepalive_time_ms': this.dependencies.options.keepaliveIntervalMs ?? KEEPALIVE_TIME_MS,
      'grpc.keepalive_timeout_ms': this.dependencies.options.keepaliveTimeoutMs ?? KEEPALIVE_TIMEOUT_MS,
    });
    const call = (client as unknown as { Connect(): WorkerCall }).Connect();
    let markClosed!: () => void;
    const connection: Connection = {
      call, writer: new EventWriter(call), welcomed: false, lastHeartbeatAt: 0, tickPending: false, readySent: false,
      closed: new Promise<void>((resolve) => { markClosed = resolve; }),
    };
    let ended = false;
    const end = (detail: string) => {
      if (ended) return;
      ended = true;
      clearInterval(connection.heartbeat);
      clearInterval(connection.signalsPoll);
      clearTimeout(connection.earlyHeartbeat);
      connection.writer.close();
      this.jobs.abandon(connection.writer);
      if (this.connection === connection) this.connection = undefined;
      client.close();
      this.logger.info({ detail }, 'stream to the control plane closed');
      markClosed();
    };
    call.on('data', (frame: ControlFrame) => this.onFrame(connection, frame));
    call.on('error', (error: Error) => end(error.message));
    call.on('status', (status: grpc.StatusObject) => end(`status ${status.code} ${status.details}`));
    this.connection = connection;
    connection.writer.writeFrame({ hello: this.hello() });
    return connection;
  }

  private onFrame(connection: Connection, frame: ControlFrame): void {
    switch (frame.frame) {
      case 'welcome':
        return this.onWelcome(connection, frame.welcome as Welcome);
      case 'reject':
        connection.rejection = frame.reject;
        this.logger.error({ code: frame.reject?.code, message: frame.reject?.message }, 'control plane rejected the agent');
        // The control plane ends the stream after a Reject; do not depend on it.
        connection.call.cancel();
        return;
      case 'assign':
        return this.jobs.assign(frame.assign!, connection.writer);
      case 'assignBatch':
        for (const assign of frame.assignBatch!.assigns) this.jobs.assign(assign, connection.writer);
        return;
      case 'cancel':
        return this.jobs.cancel(frame.cancel!.jobId, frame.cancel!.reason);
      case 'credit':
        return this.jobs.credit(frame.credit!.jobId, frame.credit!.bytes);
      case 'drain':
        void this.stop(`drain requested: ${frame.drain?.reason || 'no reason given'}`);
        return;
      default:
        this.logger.warn({ frame: frame.frame }, 'ignoring an unknown control frame');
    }
  }

  private onWelcome(connection: Connection, welcome: Welcome): void {
    if (welcome.protocolVersion !== PROTOCOL_VERSION) {
      // Frames of another version could mean other things: refuse it as it would refuse us.
      connection.rejection = {
        code: 'unsupported_protocol',
        message: `the control plane speaks worker protocol ${welcome.protocolVersion}; this agent speaks ${PROTOCOL_VERSION}: run an agent of the control plane's release`,
      };
      this.logger.error({ ours: PROTOCOL_VERSION, theirs: welcome.protocolVersion }, 'control plane speaks another worker protocol version');
      connection.call.cancel();
      return;
    }
    connection.welcomed = true;
    this.welcome = welcome;
    this.dependencies.onWelcome?.(welcome);
    // Guests only where the engine can run them below owners: a control plane that asks an
    // incapable agent anyway gets its guest jobs refused (invalid_job) rather than served FCFS.
    const priorityScheduling = welcome.priorityScheduling === true && this.dependencies.engine.priorityCapable;
    this.jobs.setPriorityScheduling(priorityScheduling);
    this.jobs.setReplica(welcome.replicaId);
    this.logger.info({ replicaId: welcome.replicaId, deploymentId: welcome.deploymentId, model: welcome.model, priorityScheduling }, 'welcomed by the control plane');
    if (welcome.priorityScheduling && !priorityScheduling) {
      this.logger.warn({ engine: this.dependencies.engine.kind }, 'welcomed with priority scheduling, but the engine does not run it: guest jobs will be refused');
    }
    const intervalMs = welcome.heartbeatIntervalMs > 0 ? welcome.heartbeatIntervalMs : DEFAULT_HEARTBEAT_INTERVAL_MS;
    this.heartbeatTick(connection);
    connection.heartbeat = setInterval(() => this.heartbeatTick(connection), intervalMs);
    connection.signalsPoll = setInterval(() => {
      if (this.signalsLocal) void this.readSignals();
    }, SIGNALS_POLL_MS);
  }

  /** A regular heartbeat: reads the engine's signals first (a fetch is waited for briefly), then sends. */
  private heartbeatTick(connection: Connection): void {
    const reading = this.readSignals();
    if (!reading) {
      this.sendHeartbeat(connection);
      return;
    }
    connection.tickPending = true;
    void settlesWithin(reading, SIGNALS_WAIT_MS).then(() => this.sendHeartbeat(connection));
  }

  /** Reads the engine's signals; a promise when the engine fetches them. Never rejects. */
  private readSignals(): Promise<void> | undefined {
    let answer: EngineSignalsAnswer | undefined;
    try {
      answer = this.dependencies.engine.signals?.();
    } catch (error) {
      this.logger.warn({ err: error }, 'the engine failed to report its signals');
      answer = null;
    }
    if (!isSignalsPromise(answer)) {
      this.signalsLocal = true;
      this.acceptSignals(answer ?? null);
      return undefined;
    }
    this.signalsLocal = false;
    return answer.then((signals) => this.acceptSignals(signals), () => this.acceptSignals(null));
  }

  private acceptSignals(signals: EngineSignalsRead): void {
    const previous = this.engineSignals;
    this.engineSignals = signals;
    if (crossesThreshold(previous, signals)) this.earlyHeartbeat();
  }

  /**
   * Requests started waiting in the engine, or its KV cache crossed KV_CACHE_PRESSURE: the
   * control plane hears it now rather than at the next tick, yet from at most one heartbeat
   * per EARLY_HEARTBEAT_MIN_GAP_MS (the crossing is sent once the gap has passed).
   */
  private earlyHeartbeat(): void {
    const connection = this.connection;
    if (!connection?.welcomed || connection.earlyHeartbeat || connection.tickPending) return;
    const waitMs = connection.lastHeartbeatAt + EARLY_HEARTBEAT_MIN_GAP_MS - Date.now();
    if (waitMs <= 0) {
      this.sendHeartbeat(connection);
      return;
    }
    connection.earlyHeartbeat = setTimeout(() => {
      connection.earlyHeartbeat = undefined;
      this.sendHeartbeat(connection);
    }, waitMs);
  }

  /** Sends a heartbeat now rather than at the next tick: load progress, and readiness the moment the model is loaded. */
  heartbeatNow(): void {
    const connection = this.connection;
    if (connection?.welcomed) this.sendHeartbeat(connection);
  }

  private sendHeartbeat(connection: Connection): void {
    const health = this.dependencies.engine.health();
    const engineSignals = engineSignalsFrame(this.engineSignals);
    const adapters = this.servesAdapters() ? this.dependencies.engine.adapters!.snapshot() : undefined;
    // Until the control plane has heard the engine ready on this stream, with the phases complete.
    const startupPhases = connection.readySent ? undefined : this.dependencies.startupPhases?.frames();
    if (health.status === 'ENGINE_HEALTH_HEALTHY' || health.status === 'ENGINE_HEALTH_DEGRADED') connection.readySent = true;
    connection.lastHeartbeatAt = Date.now();
    connection.tickPending = false;
    // This one carries the latest signals: an early one still held back has nothing left to say.
    clearTimeout(connection.earlyHeartbeat);
    connection.earlyHeartbeat = undefined;
    connection.writer.writeFrame({
      heartbeat: {
        inFlight: this.jobs.inFlight, queued: this.jobs.queued, engineHealth: health.status, detail: health.detail,
        ...(health.loadPercent === undefined ? {} : { loadPercent: health.loadPercent }),
        ...(engineSignals ? { engineSignals } : {}),
        ...(adapters ? { adapters } : {}),
        ...(startupPhases?.length ? { startupPhases } : {}),
      },
    });
  }

  /** The engine hot-loads adapters (its Hello says max_loras > 0): every heartbeat carries their residency. */
  private servesAdapters(): boolean {
    return (this.dependencies.engine.adapters?.capacity.maxLoras ?? 0) > 0;
  }

  private hello(): Hello {
    const { options, engine, agentVersion } = this.dependencies;
    const lora = this.servesAdapters() ? engine.adapters!.capacity : undefined;
    return {
      protocolVersion: PROTOCOL_VERSION,
      agentVersion,
      joinToken: options.joinToken,
      gpus: [...options.gpus],
      engine: { kind: engine.kind, version: engine.version, url: engine.url },
      models: [...engine.models()],
      maxConcurrency: options.maxConcurrency,
      agentId: options.agentId,
      priorityCapable: engine.priorityCapable,
      flowControl: true,
      preemptsBatchLines: engine.batchPreemption !== undefined,
      ...(lora ? { maxLoras: lora.maxLoras, maxCpuLoras: lora.maxCpuLoras, maxLoraRank: lora.maxLoraRank } : {}),
      ...this.cachedModels(),
    };
  }

  /** What the weights cache holds, for the Hello; a cache that cannot be read holds nothing worth saying. */
  private cachedModels(): { cachedModels?: string[] } {
    try {
      const models = this.dependencies.cachedModels?.() ?? [];
      return models.length > 0 ? { cachedModels: [...models] } : {};
    } catch (error) {
      this.logger.warn({ err: error }, 'could not read the weights cache for the Hello');
      return {};
    }
  }

  private async drainAndEnd(reason: string): Promise<void> {
    this.logger.info({ reason, inFlight: this.jobs.inFlight, queued: this.jobs.queued }, 'draining');
    this.stopping.abort();
    await this.jobs.drain(this.dependencies.options.drainTimeoutMs);
    const connection = this.connection;
    if (connection) {
      // Both waits are bounded: a control plane that stopped reading must not hold the exit.
      await settlesWithin(connection.writer.flushed(), STREAM_END_GRACE_MS);
      connection.call.end();
      if (!(await settlesWithin(connection.closed, STREAM_END_GRACE_MS))) connection.call.cancel();
    }
    this.finish({ exitCode: 0, reason });
  }

  private finish(exit: AgentExit): void {
    if (this.state === 'stopped') return;
    this.state = 'stopped';
    this.logger.info({ exitCode: exit.exitCode, reason: exit.reason }, 'agent stopped');
    this.resolveExit(exit);
  }
}

function settlesWithin(promise: Promise<void>, milliseconds: number): Promise<boolean> {
  return Promise.race([promise.then(() => true), sleep(milliseconds, false, { ref: false })]);
}
