import type * as grpc from '@grpc/grpc-js';
import type { AgentFrame, Assign, ControlFrame, Heartbeat, HeartbeatEngineSignals, JobEvent } from '../../proto/worker/v1';
import { toAssign } from './assign-mapping';
import type { Job, JobCarrier } from './job';
import { deliverJobEvent, type DeliveryHooks } from './job-event-delivery';
import { LatencyWindow } from './latency-window';

type Stream = grpc.ServerDuplexStream<AgentFrame, ControlFrame>;

export interface ConnectionOwner {
  /** A job failed with `agent_draining` before producing anything: run it elsewhere. */
  retry(job: Job, from: AgentConnection): void;
  /** A job left the connection (finished, failed or canceled). */
  released(connection: AgentConnection): void;
}


/** One agent's live stream: the jobs it carries and the load it reported. */
export class AgentConnection implements JobCarrier {
  readonly jobs = new Map<string, Job>();
  inFlight = 0;
  /** Of `inFlight`, the jobs of shared-serving guests (never counted as the owner's load). */
  guestInFlight = 0;
  /** Of `inFlight`, the lines of batches (never counted as the owner's load: batches do not scale a deployment up). */
  batchInFlight = 0;
  draining = false;
  closed = false;

  /**
   * The owner's jobs on this replica: the load the autoscaler scales its deployment by. Guests and
   * batch lines only fill idle slots and must not buy the owner replicas; a job addressed to one
   * of the deployment's LoRA adapters is the owner's like any other (docs/adapters.md#usage).
   */
  get ownerInFlight(): number {
    return this.inFlight - this.guestInFlight - this.batchInFlight;
  }
  /** The engine reported ready: the dispatcher routes work here. */
  ready = false;
  /** When the agent's last frame came, on AgentServer's clock (it sets this from the Welcome on). */
  lastSeenAt = 0;
  /** The latest heartbeat, as received. */
  heartbeat: Heartbeat | null = null;
  private pendingAssigns: Assign[] = [];

  constructor(
    readonly stream: Stream,
    readonly agentId: string,
    readonly replicaId: string,
    readonly deploymentId: string,
    readonly maxConcurrency: number,
    private readonly owner: ConnectionOwner,
    readonly workspaceId = '',
    /** Welcomed with priority scheduling: the replica may take guests into the slots its owner leaves idle. */
    readonly priorityScheduling = false,
    /** `Hello.engine.kind`: what answers on this replica ("cpu" is the weights-free stand-in). */
    readonly engineKind = '',
    /** `Hello.flow_control`: the agent honours stream windows and Credit; older agents get neither. */
    readonly flowControl = false,
    /** `Hello.preempts_batch_lines`: a live job sent here takes a batch line's slot at once (the line is set aside). */
    readonly preemptsBatchLines = false,
    /** `Hello.max_loras`: adapters its engine holds ready at once; 0 (unset): it serves no adapter (docs/adapters.md). */
    readonly maxLoras = 0,
    /** `Hello.max_cpu_loras`: adapters it keeps in host memory beyond those (bounds what its heartbeat may report). */
    readonly maxCpuLoras = 0,
  ) {}

  /** Made once: jobs' events arrive per chunk, on the hot path. */
  private readonly deliveryHooks: DeliveryHooks = {
    settled: (job) => this.release(job),
    retry: (job) => this.owner.retry(job, this),
    firstOutput: (job) => this.latency.firstOutput(performance.now() - job.assignedAt),
    completed: (job) => this.latency.completed(performance.now() - job.assignedAt),
  };
  /** This replica's job latencies since the last heartbeat (reported with its load). */
  readonly latency = new LatencyWindow();

  private reservedSlots = 0;

  /** Slots set aside for work being placed here (a claim, a sync call, a guest's credit check). */
  get reserved(): number {
    return this.reservedSlots;
  }

  /**
   * Sets one slot aside until the work it is for is on the agent or given up; the hold gives it
   * back exactly once. The only way a slot is reserved, so none is released twice or leaked.
   */
  reserveSlot(): SlotHold {
    this.reservedSlots++;
    return new SlotHold(this, () => this.reservedSlots--);
  }

  /** Load as a fraction of the agent's concurrency; the dispatcher picks the smallest. */
  get load(): number {
    return this.inFlight / this.maxConcurrency;
  }

  /**
   * What the engine itself reported on the latest heartbeat (running and waiting requests,
   * KV-cache use, prefix-cache hit rate); null when it reported none, or the agent is older.
   */
  get engineSignals(): HeartbeatEngineSignals | null {
    return this.heartbeat?.engineSignals ?? null;
  }

  /** Jobs this agent can still start now without queueing locally. */
  get freeSlots(): number {
    return this.draining || this.closed ? 0 : this.maxConcurrency - this.inFlight - this.reserved;
  }

  /**
   * Batch lines whose slot a live job sent here would take at once: on a replica that preempts
   * them, those not already set aside for a live job (jobs beyond the slots are parked lines).
   */
  get preemptibleLines(): number {
    if (!this.preemptsBatchLines || this.batchInFlight === 0) return 0;
    return Math.max(0, this.batchInFlight - Math.max(0, this.inFlight - this.maxConcurrency));
  }

  /** Live jobs this agent can still start now: its free slots and the slots of preemptible lines. */
  get liveFreeSlots(): number {
    return this.draining || this.closed ? 0 : Math.max(0, this.freeSlots) + this.preemptibleLines;
  }

  /**
   * Slots busy as a live job sees them: live jobs, and batch lines; a preemptible line at half
   * weight (its slot can be had at once, at the cost of setting the line aside), so a free slot
   * is still preferred to one.
   */
  get liveBusy(): number {
    const live = this.inFlight - this.batchInFlight;
    return live + (this.preemptsBatchLines ? this.preemptibleLines / 2 : this.batchInFlight);
  }

  /** `liveBusy` as a fraction of the agent's concurrency; the dispatcher picks the smallest. */
  get liveLoad(): number {
    return this.liveBusy / this.maxConcurrency;
  }

  /** Jobs sent here beyond its slots that wait in the agent's queue (parked lines do not wait). */
  get waiting(): number {
    return Math.max(0, this.inFlight - (this.preemptsBatchLines ? this.batchInFlight : 0) - this.maxConcurrency);
  }

  send(frame: ControlFrame): void {
    // Assigns still waiting for their batch go first, so a Cancel never overtakes its job.
    if (this.pendingAssigns.length > 0) this.flushAssigns();
    if (!this.closed) this.stream.write(frame);
  }

  /**
   * Queues the job's Assign; every Assign made in this event-loop turn leaves as one frame
   * (setImmediate runs right after the I/O phase that produced them, adding no wait).
   */
  assign(job: Job): void {
    this.jobs.set(job.id, job);
    this.inFlight++;
    const request = job.request;
    if (request.guest) this.guestInFlight++;
    if (request.batch) this.batchInFlight++;
    job.carrier = this;
    job.assignedAt = performance.now();
    this.pendingAssigns.push(toAssign(job.id, request, this.flowControl));
    if (this.pendingAssigns.length === 1) setImmediate(this.flushAssigns);
  }

  private readonly flushAssigns = (): void => {
    const assigns = this.pendingAssigns;
    if (assigns.length === 0 || this.closed) return;
    this.pendingAssigns = [];
    this.stream.write(assigns.length === 1 ? { frame: 'assign', assign: assigns[0] } : { frame: 'assignBatch', assignBatch: { assigns } });
  };

  cancelJob(job: Job, reason: string): void {
    if (this.jobs.has(job.id)) this.send({ frame: 'cancel', cancel: { jobId: job.id, reason } });
  }

  creditJob(job: Job, bytes: number): void {
    if (this.flowControl && this.jobs.has(job.id)) this.send({ frame: 'credit', credit: { jobId: job.id, bytes } });
  }

  drain(reason: string): void {
    this.draining = true;
    this.send({ frame: 'drain', drain: { reason } });
  }

  onJobEvent(event: JobEvent): void {
    const job = this.jobs.get(event.jobId);
    if (job) deliverJobEvent(job, event, this.deliveryHooks);
  }

  /** The stream is gone: every job it carried fails with `pod_crash`. */
  close(message: string): void {
    if (this.closed) return;
    this.closed = true;
    const jobs = [...this.jobs.values()];
    this.jobs.clear();
    this.inFlight = 0;
    this.guestInFlight = 0;
    this.batchInFlight = 0;
    for (const job of jobs) {
      job.finished = true;
      job.listener.onFailed({ code: 'pod_crash', message, engineStatus: 0, engineBody: null, usage: undefined });
    }
  }

  private release(job: Job): void {
    if (this.jobs.delete(job.id)) {
      this.inFlight--;
      if (job.request.guest) this.guestInFlight--;
      if (job.request.batch) this.batchInFlight--;
      this.owner.released(this);
    }
  }
}

/** One slot set aside on a replica (AgentConnection.reserveSlot). */
export class SlotHold {
  private held = true;

  constructor(readonly connection: AgentConnection, private readonly free: () => void) {}

  /** Gives the slot back (the work is on the agent now, or will not run); later calls do nothing. */
  release(): void {
    if (!this.held) return;
    this.held = false;
    this.free();
  }
}
