import * as grpc from '@grpc/grpc-js';
import type { Logger } from 'pino';
import { hostPort } from '../network/bind-address';
import { loadWorkerService, PROTOCOL_VERSION, type AgentFrame, type ControlFrame, type Heartbeat, type Hello } from '../../proto/worker/v1';
import type { ControlPlaneEvents } from '../events/control-plane-events';
import type { ReplicaManager } from '../replicas/replica-manager';
import { phasesSignature } from '../replicas/startup-phases';
import { AgentConnection } from './agent-connection';
import { engineLoadOf } from './engine-load';
import type { Dispatcher } from './dispatcher';

type Stream = grpc.ServerDuplexStream<AgentFrame, ControlFrame>;

export interface AgentServerOptions {
  host: string;
  port: number;
  helloTimeoutMs: number;
  heartbeatIntervalMs: number;
  /** The clock in milliseconds that agents' silence is measured by. @default Date.now */
  now?: () => number;
}

/**
 * The gRPC side of worker.v1 (proto/PROTOCOL.md): admits agents by join token, hands their
 * streams to the dispatcher, and ends streams that fall silent for 3 heartbeat intervals.
 */
export class AgentServer {
  private readonly server = new grpc.Server({ 'grpc.max_receive_message_length': 64 * 1024 * 1024 });
  private readonly byReplica = new Map<string, AgentConnection>();
  private sweepTimer: NodeJS.Timeout | undefined;
  /** Replica status writes still running; stop() waits for them before the database closes. */
  private readonly pendingWrites = new Set<Promise<void>>();
  private readonly writesByReplica = new Map<string, Promise<void>>();
  port = 0;
  private readonly now: () => number;

  constructor(
    private readonly options: AgentServerOptions,
    private readonly dispatcher: Dispatcher,
    private readonly replicas: ReplicaManager,
    private readonly logger: Logger,
    private readonly events?: ControlPlaneEvents,
  ) {
    this.now = options.now ?? Date.now;
    const service = loadWorkerService();
    this.server.addService(service.service, { connect: (stream: Stream) => this.onConnect(stream) });
  }

  /** Serves another gRPC service on the agents' port (the cluster relay); before start(). */
  addService(service: grpc.ServiceDefinition, handlers: grpc.UntypedServiceImplementation): void {
    this.server.addService(service, handlers);
  }

  async start(): Promise<number> {
    this.port = await new Promise<number>((resolve, reject) => {
      // hostPort: an IPv6 GRPC_HOST (`::`) must be bracketed, or grpc-js takes it for a name and fails.
      this.server.bindAsync(hostPort(this.options.host, this.options.port), grpc.ServerCredentials.createInsecure(),
        (error, port) => (error ? reject(error) : resolve(port)));
    });
    this.lastSweepAt = this.now();
    this.sweepTimer = setInterval(() => this.sweep(), this.options.heartbeatIntervalMs);
    this.sweepTimer.unref();
    return this.port;
  }

  connectionOf(replicaId: string): AgentConnection | undefined {
    return this.byReplica.get(replicaId);
  }

  async stop(): Promise<void> {
    clearInterval(this.sweepTimer);
    for (const connection of [...this.byReplica.values()]) this.onClosed(connection, 'the control plane shut down');
    await new Promise<void>((resolve) => this.server.tryShutdown(() => resolve()));
    this.server.forceShutdown();
    await Promise.all(this.pendingWrites);
  }

  private onConnect(stream: Stream): void {
    let connection: AgentConnection | null = null;
    let helloSeen = false;
    const helloTimer = setTimeout(() => this.refuse(stream, 'hello_timeout', 'no Hello within the timeout'), this.options.helloTimeoutMs);

    stream.on('data', (frame: AgentFrame) => {
      if (connection) {
        connection.lastSeenAt = this.now();
        this.onFrame(connection, frame);
        return;
      }
      if (helloSeen || frame.frame !== 'hello' || !frame.hello) {
        this.refuse(stream, 'protocol_violation', helloSeen ? 'frame before Welcome' : 'the first frame must be Hello');
        return;
      }
      helloSeen = true;
      clearTimeout(helloTimer);
      this.admit(stream, frame.hello).then((admitted) => {
        connection = admitted;
      }, (error) => {
        this.logger.error({ err: error }, 'agent admission failed');
        this.refuse(stream, 'internal_error', 'the control plane could not admit the agent');
      });
    });
    const closed = () => {
      clearTimeout(helloTimer);
      if (connection) this.onClosed(connection, 'the replica\'s agent disconnected');
    };
    stream.on('end', () => {
      closed();
      stream.end();
    });
    stream.on('error', closed);
    stream.on('cancelled', closed);
    stream.on('close', closed);
  }

  private async admit(stream: Stream, hello: Hello): Promise<AgentConnection | null> {
    if (hello.protocolVersion !== PROTOCOL_VERSION) {
      this.refuse(stream, 'unsupported_protocol', `protocol ${hello.protocolVersion} is not supported; this control plane speaks ${PROTOCOL_VERSION}`);
      return null;
    }
    const result = await this.replicas.join(hello.joinToken, hello);
    if (!result.ok) {
      this.refuse(stream, result.code, result.message);
      return null;
    }
    const previous = this.byReplica.get(result.replica.id);
    if (previous && !previous.closed) {
      if (previous.agentId !== hello.agentId) {
        this.refuse(stream, 'duplicate_agent', 'another agent holds this replica');
        return null;
      }
      // The same agent reconnected before we noticed its old stream died.
      this.onClosed(previous, 'the agent reconnected on a new stream');
    }
    const connection = new AgentConnection(stream, hello.agentId, result.replica.id, result.deployment.id,
      Math.max(1, hello.maxConcurrency || 1), this.dispatcher, result.deployment.workspaceId, result.priorityScheduling, hello.engine?.kind ?? '', hello.flowControl === true,
      hello.preemptsBatchLines === true, hello.maxLoras ?? 0, hello.maxCpuLoras ?? 0);
    connection.lastSeenAt = this.now();
    this.byReplica.set(result.replica.id, connection);
    connection.send({
      frame: 'welcome',
      welcome: {
        replicaId: result.replica.id, deploymentId: result.deployment.id, model: result.deployment.modelId,
        protocolVersion: PROTOCOL_VERSION, heartbeatIntervalMs: this.options.heartbeatIntervalMs,
        priorityScheduling: result.priorityScheduling,
      },
    });
    // Work is routed to it once its first heartbeat says the engine is ready (onHeartbeat).
    this.logger.info({ replicaId: result.replica.id, agentId: hello.agentId, engine: hello.engine?.kind }, 'agent joined');
    return connection;
  }

  private onFrame(connection: AgentConnection, frame: AgentFrame): void {
    switch (frame.frame) {
      case 'jobEvent':
        connection.onJobEvent(frame.jobEvent!);
        return;
      case 'jobEvents':
        for (const event of frame.jobEvents!.events) connection.onJobEvent(event);
        return;
      case 'heartbeat':
        this.onHeartbeat(connection, frame.heartbeat!);
        return;
      default:
        this.refuse(connection.stream, 'protocol_violation', 'a second Hello on the same stream');
    }
  }

  /**
   * A replica takes work from its engine's first ready heartbeat on: an engine still loading
   * its model (STARTING, with progress) or unreachable (UNHEALTHY) keeps the replica Creating.
   */
  private onHeartbeat(connection: AgentConnection, heartbeat: Heartbeat): void {
    const previous = connection.heartbeat;
    connection.heartbeat = heartbeat;
    this.events?.emit('replicaLoad', {
      replicaId: connection.replicaId, deploymentId: connection.deploymentId, workspaceId: connection.workspaceId, inFlight: connection.inFlight,
      queued: heartbeat.queued, engineHealth: heartbeat.engineHealth, at: new Date(this.now()), ...connection.latency.take(),
      ...engineLoadOf(heartbeat.engineSignals),
    });
    if (connection.ready || connection.closed) return;
    const health = heartbeat.engineHealth;
    if (health === 'ENGINE_HEALTH_STARTING' || health === 'ENGINE_HEALTH_UNHEALTHY') {
      const percent = heartbeat.loadPercent ?? 0;
      // A start-up phase begun or ended is written too: a replica that never gets ready shows where it stuck.
      if (previous?.loadPercent !== percent || previous?.detail !== heartbeat.detail || phasesSignature(previous?.startupPhases) !== phasesSignature(heartbeat.startupPhases)) {
        this.track(connection.replicaId, () => this.replicas.reportProgress(connection.replicaId, connection.deploymentId, percent, heartbeat.detail, heartbeat.startupPhases));
      }
      return;
    }
    connection.ready = true;
    this.track(connection.replicaId, async () => {
      const running = await this.replicas.markReady(connection.replicaId, heartbeat.startupPhases);
      // A replica ended while its agent was starting (scaled down, paused) takes no work.
      if (!running) connection.stream.end();
      else if (!connection.closed) this.dispatcher.register(connection);
    });
  }

  /**
   * A replica write the shutdown must wait for before the database closes. Writes for one
   * replica run in the order of its events: a `lost` must not commit before the `markReady`
   * of the same agent, or the row would end Running (and billed) with no agent behind it.
   */
  private track(replicaId: string, write: () => Promise<unknown>): void {
    const tracked = (this.writesByReplica.get(replicaId) ?? Promise.resolve())
      .then(write)
      .then(() => undefined, (error) => this.logger.error({ err: error, replicaId }, 'could not record a replica change'))
      .finally(() => {
        this.pendingWrites.delete(tracked);
        if (this.writesByReplica.get(replicaId) === tracked) this.writesByReplica.delete(replicaId);
      });
    this.writesByReplica.set(replicaId, tracked);
    this.pendingWrites.add(tracked);
  }

  private onClosed(connection: AgentConnection, message: string): void {
    if (connection.closed) return;
    connection.close(message);
    this.dispatcher.unregister(connection);
    if (this.byReplica.get(connection.replicaId) === connection) this.byReplica.delete(connection.replicaId);
    this.track(connection.replicaId, () => connection.ready
      ? this.replicas.lost(connection.replicaId, message)
      : this.replicas.disconnectedWhileStarting(connection.replicaId, `the agent disconnected before its engine was ready: ${message}`));
    connection.stream.end();
  }

  private refuse(stream: Stream, code: string, message: string): void {
    if (stream.writable) {
      stream.write({ frame: 'reject', reject: { code, message } });
      stream.end();
    }
  }

  /** When the sweep last ran (set by start()): a sweep much later than its interval follows a stall of this process. */
  private lastSweepAt = 0;

  /** Ends streams silent for 3 heartbeat intervals: a frozen host holds no work. */
  private sweep(): void {
    const now = this.now();
    const stalled = now - this.lastSweepAt > 2 * this.options.heartbeatIntervalMs;
    this.lastSweepAt = now;
    // After a stall of this server's own loop (a long GC pause, a blocking call) the overdue
    // sweep runs before the sockets are read again: the heartbeats sent meanwhile are still
    // waiting there. Judge silence at the next sweep, once they are read.
    if (stalled) return;
    const cutoff = now - 3 * this.options.heartbeatIntervalMs;
    for (const connection of this.byReplica.values()) {
      if (connection.lastSeenAt < cutoff) this.onClosed(connection, 'the replica\'s agent stopped sending heartbeats');
    }
  }
}
