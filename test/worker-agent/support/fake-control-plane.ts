/**
 * A tiny in-test control plane: a real grpc-js server on port 0 speaking worker.v1, so agent
 * tests round-trip through a real socket. Each agent stream records every frame it receives;
 * tests script the control plane's side by writing ControlFrames.
 */
import * as grpc from '@grpc/grpc-js';
import {
  loadWorkerService, PROTOCOL_VERSION,
  type AgentFrame, type ControlFrame, type Heartbeat, type Hello, type JobEvent, type Welcome,
} from '../../../proto/worker/v1/index';

export type HelloAnswer = (hello: Hello, stream: FakeAgentStream) => ControlFrame | undefined;

export interface FakeControlPlaneOptions {
  /** What to answer each Hello with; by default a Welcome with a 200 ms heartbeat interval. */
  readonly answerHello?: HelloAnswer;
}

const DEFAULT_WAIT_MS = 5_000;

export function welcomeFrame(overrides: Partial<Welcome> = {}): ControlFrame {
  return {
    welcome: {
      replicaId: 'rep_test', deploymentId: 'dep_test', model: 'test-model',
      protocolVersion: PROTOCOL_VERSION, heartbeatIntervalMs: 200, ...overrides,
    },
  };
}

/** Resolves with the first truthy `probe()`, re-checked whenever a listener in `listeners` is called. */
function waitUntil<T>(listeners: Set<() => void>, probe: () => T | undefined | false, timeoutMs: number, what: string): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const check = () => {
      const value = probe();
      if (!value) return;
      cleanup();
      resolve(value);
    };
    const timer = setTimeout(() => { cleanup(); reject(new Error(`${what} not met within ${timeoutMs} ms`)); }, timeoutMs);
    const cleanup = () => { clearTimeout(timer); listeners.delete(check); };
    listeners.add(check);
    check();
  });
}

export class FakeAgentStream {
  readonly frames: AgentFrame[] = [];
  /** Every job event received, batches flattened, in arrival order. */
  readonly events: JobEvent[] = [];
  ended = false;
  private readonly listeners = new Set<() => void>();

  constructor(readonly call: grpc.ServerDuplexStream<AgentFrame, ControlFrame>) {
    call.on('data', (frame: AgentFrame) => {
      this.frames.push(frame);
      if (frame.jobEvent) this.events.push(frame.jobEvent);
      for (const event of frame.jobEvents?.events ?? []) this.events.push(event);
      this.notify();
    });
    const markEnded = () => { this.ended = true; this.notify(); };
    // A real control plane finishes the call once the agent has ended its side.
    call.on('end', () => { markEnded(); call.end(); });
    call.on('error', markEnded);
    call.on('close', markEnded);
    call.on('cancelled', markEnded);
  }

  get hello(): Hello | undefined {
    return this.frames[0]?.hello;
  }

  send(frame: ControlFrame): void {
    this.call.write(frame);
  }

  /** Ends the control plane's side, as a control plane shutting down a stream would. */
  end(): void {
    this.call.end();
  }

  eventsOf(jobId: string): JobEvent[] {
    return this.events.filter((event) => event.jobId === jobId);
  }

  terminalOf(jobId: string): JobEvent | undefined {
    return this.eventsOf(jobId).find((event) => event.completed || event.failed);
  }

  /** Resolves with the first truthy value of `probe`, re-checked after every received frame. */
  until<T>(probe: () => T | undefined | false, timeoutMs = DEFAULT_WAIT_MS): Promise<T> {
    return waitUntil(this.listeners, probe, timeoutMs, 'condition');
  }

  /** Heartbeats received so far, in order. */
  get heartbeats(): Heartbeat[] {
    return this.frames.flatMap((frame) => (frame.heartbeat ? [frame.heartbeat] : []));
  }

  /** Resolves once the agent reports a healthy engine (a real control plane sends work only then). */
  ready(timeoutMs?: number): Promise<Heartbeat> {
    return this.until(() => this.heartbeats.find((heartbeat) => heartbeat.engineHealth === 'ENGINE_HEALTH_HEALTHY'), timeoutMs);
  }

  terminal(jobId: string, timeoutMs?: number): Promise<JobEvent> {
    return this.until(() => this.terminalOf(jobId), timeoutMs);
  }

  /** Concatenated chunk bytes of a job. */
  chunkText(jobId: string): string {
    return Buffer.concat(this.eventsOf(jobId).filter((event) => event.chunk).map((event) => event.chunk!.data)).toString('utf8');
  }

  private notify(): void {
    for (const listener of [...this.listeners]) listener();
  }
}

export class FakeControlPlane {
  readonly streams: FakeAgentStream[] = [];
  private readonly streamListeners = new Set<() => void>();

  private constructor(private readonly server: grpc.Server, readonly address: string) {}

  static async start(options: FakeControlPlaneOptions = {}): Promise<FakeControlPlane> {
    const server = new grpc.Server();
    const answerHello = options.answerHello ?? (() => welcomeFrame());
    let plane: FakeControlPlane | undefined;
    server.addService(loadWorkerService().service, {
      Connect: (call: grpc.ServerDuplexStream<AgentFrame, ControlFrame>) => {
        const stream = new FakeAgentStream(call);
        call.once('data', (frame: AgentFrame) => {
          const answer = frame.hello ? answerHello(frame.hello, stream) : undefined;
          if (answer) call.write(answer);
          if (answer?.reject) call.end();
        });
        plane!.streams.push(stream);
        for (const listener of [...plane!.streamListeners]) listener();
      },
    });
    const port = await new Promise<number>((resolve, reject) => {
      server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (error, boundPort) => (error ? reject(error) : resolve(boundPort)));
    });
    plane = new FakeControlPlane(server, `127.0.0.1:${port}`);
    return plane;
  }

  /** The `index`-th agent stream (0-based), once it has sent its Hello. */
  async stream(index: number, timeoutMs = DEFAULT_WAIT_MS): Promise<FakeAgentStream> {
    const stream = await waitUntil(this.streamListeners, () => this.streams[index], timeoutMs, `agent stream #${index}`);
    await stream.until(() => stream.hello, timeoutMs);
    return stream;
  }

  async close(): Promise<void> {
    this.server.forceShutdown();
  }
}
