/**
 * In-memory collaborators of the scheduling core: agents are real `AgentConnection`s over a
 * stream that only records frames (so load, slots, guests and event delivery are the real
 * code's), listeners record what they hear, loggers record what they say. Every way of
 * building an agent goes through `agent()`, so a change to AgentConnection's constructor is
 * adapted here once.
 */
import type { Logger } from 'pino';
import type { ControlFrame, JobEvent, Usage } from '../../../proto/worker/v1';
import { AgentConnection, type ConnectionOwner } from '../../../control-plane/dispatch/agent-connection';
import type { DispatchRequest, JobFailure, JobListener } from '../../../control-plane/dispatch/job';
import { AppError, type AppErrorCode } from '../../../control-plane/errors/app-error';

export interface AgentOptions {
  replicaId?: string;
  deploymentId?: string;
  maxConcurrency?: number;
  workspaceId?: string;
  priorityScheduling?: boolean;
  engineKind?: string;
  /** `Hello.max_loras` / `max_cpu_loras`: adapter slots (0: it serves no adapter). */
  maxLoras?: number;
  maxCpuLoras?: number;
}

export interface FakeAgent {
  connection: AgentConnection;
  /** Every frame the control plane wrote to this agent, Assigns once their turn flushed them. */
  frames: ControlFrame[];
}

let replicaSequence = 0;

/** A connected agent of one replica; `owner` is who hears retries and freed slots (usually the Dispatcher). */
export function agent(owner: ConnectionOwner, options: AgentOptions = {}): FakeAgent {
  const frames: ControlFrame[] = [];
  const stream = {
    write: (frame: ControlFrame) => {
      frames.push(frame);
      return true;
    },
    end: () => {},
  } as unknown as ConstructorParameters<typeof AgentConnection>[0];
  const replicaId = options.replicaId ?? `rep_${++replicaSequence}`;
  const connection = new AgentConnection(
    stream, `agt_${replicaId}`, replicaId, options.deploymentId ?? 'dep_a', options.maxConcurrency ?? 4, owner,
    options.workspaceId ?? 'ws_owner', options.priorityScheduling ?? false, options.engineKind ?? 'vllm', false, false,
    options.maxLoras ?? 0, options.maxCpuLoras ?? 0,
  );
  return { connection, frames };
}

/** Sets `count` slots of the replica aside, as a scheduler claiming work would. */
export function reserveSlots(connection: AgentConnection, count: number): void {
  for (let index = 0; index < count; index++) connection.reserveSlot();
}

export function request(overrides: Partial<DispatchRequest> = {}): DispatchRequest {
  return {
    deploymentId: 'dep_a', kind: 'JOB_KIND_CHAT_COMPLETION', body: Buffer.from('{"messages":[]}'), stream: false,
    includeUsage: false, model: 'model-a', deadlineUnixMs: 0, ...overrides,
  };
}

/** A JobListener that records every call in order. */
export class RecordingListener implements JobListener {
  readonly calls: string[] = [];
  readonly chunks: Buffer[] = [];
  readonly failures: JobFailure[] = [];
  completedWith: { usage: Usage | undefined; finishReason: string } | null = null;

  onChunk(data: Buffer): void {
    this.calls.push('chunk');
    this.chunks.push(data);
  }

  onOutput(): void {
    this.calls.push('output');
  }

  onCompleted(usage: Usage | undefined, finishReason: string): void {
    this.calls.push('completed');
    this.completedWith = { usage, finishReason };
  }

  onFailed(failure: JobFailure): void {
    this.calls.push(`failed:${failure.code}`);
    this.failures.push(failure);
  }

  /** Terminal calls heard (exactly one for every job that ended). */
  get terminals(): string[] {
    return this.calls.filter((call) => call === 'completed' || call.startsWith('failed:'));
  }
}

/** Agent events, as the agent would send them. */
export const events = {
  chunk: (jobId: string, text = 'tok'): JobEvent => ({ jobId, event: 'chunk', chunk: { data: Buffer.from(text) } }),
  completed: (jobId: string, usage?: Usage): JobEvent => ({ jobId, event: 'completed', completed: { usage, finishReason: 'stop' } }),
  failed: (jobId: string, code: string, message = `${code} happened`): JobEvent => ({
    jobId, event: 'failed', failed: { code, message, engineStatus: 0, engineBody: Buffer.alloc(0) },
  }),
};

/** A logger whose warnings and errors the test can read. */
export function recordingLogger(): { logger: Logger; warnings: string[]; errors: string[] } {
  const warnings: string[] = [];
  const errors: string[] = [];
  const logger = {
    warn: (_fields: unknown, message: string) => warnings.push(message),
    error: (_fields: unknown, message: string) => errors.push(message),
    info: () => {},
    debug: () => {},
    trace: () => {},
    child: () => logger,
  };
  return { logger: logger as unknown as Logger, warnings, errors };
}

/** A promise the test resolves or rejects when it chooses (an in-flight database call). */
export function deferred<T>(): { promise: Promise<T>; resolve(value: T): void; reject(error: unknown): void } {
  let resolve!: (value: T) => void;
  let reject!: (error: unknown) => void;
  const promise = new Promise<T>((yes, no) => {
    resolve = yes;
    reject = no;
  });
  return { promise, resolve, reject };
}

/** Lets every pending promise callback and the current turn's setImmediate work run. */
export async function flush(turns = 3): Promise<void> {
  for (let turn = 0; turn < turns; turn++) await new Promise((resolve) => setImmediate(resolve));
}

/** The AppError code `action` throws (fails the test when it throws something else or nothing). */
export function thrownCode(action: () => unknown): AppErrorCode {
  try {
    action();
  } catch (error) {
    if (error instanceof AppError) return error.code;
    throw error;
  }
  throw new Error('expected an AppError, nothing was thrown');
}

export async function rejectedWith(action: Promise<unknown>): Promise<AppError> {
  try {
    await action;
  } catch (error) {
    if (error instanceof AppError) return error;
    throw error;
  }
  throw new Error('expected an AppError, the promise resolved');
}
