import type { Job, JobListener } from '../dispatch/job';
import type { RateLimitDecision, RateLimiter } from '../rate-limits/rate-limit-decision';
import type { UsageInput } from '../usage/usage-recorder';
import type { Usage } from '../../proto/worker/v1';

/** How a request ended, as its usage record and a guest's billing see it. */
export type WorkOutcome = 'succeeded' | 'failed' | 'canceled';

/** What settlement writes to: the key's day budget, the usage records, the token metrics. */
export interface Settlement {
  readonly rateLimiter: Pick<RateLimiter, 'settle'>;
  readonly usage: { record(input: UsageInput): void };
  readonly metrics: { recordTokens(label: string, promptTokens: number, completionTokens: number): void };
  readonly now: () => number;
}

/** Who a request's usage record belongs to and how it is labelled. */
export interface TicketOwner {
  readonly workspaceId: string;
  readonly apiKeyId: string;
  /** The deployment that runs the request: the caller's own, or for a guest the owner's deployment it was placed on. */
  readonly deploymentId: string;
  /**
   * A guest's: the shared model it called (`shared/<model-id>`), its record's `shared_model`
   * and the request's label, so nothing the guest sees names the owner's deployment. Null for
   * an owner's request.
   */
  readonly sharedModel: string | null;
  readonly endpoint: string;
  readonly stream: boolean;
  /** Whether the record names the replica that ran it (a guest's never does). */
  readonly recordsReplica: boolean;
}

/** What differs between an owner's and a guest's request once admitted. */
export interface TicketParts {
  /** Sends one job of the request (a text request has one, an embeddings request one per engine batch). */
  send(listener: JobListener, body: Buffer | undefined): Job;
  /** After the usage record: a guest's bill (or the release of its credit hold). */
  finish?(outcome: WorkOutcome, usage: Usage | undefined): void;
  /** The first byte reached the client, this long after the request arrived. */
  firstToken?(ms: number): void;
}

/**
 * One admitted request, from admission to settlement. Every hold taken at admission (the TPD
 * hold, a guest's credit) is given back on every path the request can end by, in one place:
 * settled to the usage of its terminal event, or released whole when no job was ever sent.
 * A route calls `dispatch`, `settle` from the job's terminal event, and `close` when its
 * HTTP side is done (in a `finally`); the routes used to repeat that rule each in their own way.
 */
export class WorkTicket {
  private dispatched = false;
  private settled = false;

  constructor(
    /** The rate-limit state at admission, for the response headers. */
    readonly rateLimit: RateLimitDecision,
    private readonly owner: TicketOwner,
    private readonly parts: TicketParts,
    private readonly settlement: Settlement,
    private readonly startedAt: number,
  ) {}

  /** The metrics and log label (and a guest's response scope): the deployment id, or a guest's `shared/<model-id>`. */
  get label(): string {
    return this.owner.sharedModel ?? this.owner.deploymentId;
  }

  /** Sends a job of this request; throws (nothing sent, nothing to settle for it) when it cannot be placed. */
  dispatch(listener: JobListener, body?: Buffer): Job {
    const job = this.parts.send(listener, body);
    this.dispatched = true;
    return job;
  }

  /**
   * The request ended with this usage (the engine's count, or what the agent relayed before a
   * cancel): the TPD hold becomes the real usage, the usage record is written, a guest is
   * billed. Once; later calls are ignored.
   */
  settle(outcome: WorkOutcome, usage: Usage | undefined, replicaId: string | null): void {
    if (this.settled) return;
    this.settled = true;
    const { rateLimiter, usage: records, metrics, now } = this.settlement;
    const total = usage?.totalTokens ?? 0;
    rateLimiter.settle(this.rateLimit.hold, total);
    const { owner } = this;
    records.record({
      workspaceId: owner.workspaceId, apiKeyId: owner.apiKeyId, deploymentId: owner.deploymentId, sharedModel: owner.sharedModel,
      replicaId: owner.recordsReplica ? replicaId : null,
      endpoint: owner.endpoint, status: outcome, stream: owner.stream, promptTokens: usage?.promptTokens ?? 0,
      completionTokens: usage?.completionTokens ?? 0, totalTokens: total, latencyMs: now() - this.startedAt, createdAt: new Date(this.startedAt),
    });
    if (usage && total > 0) metrics.recordTokens(this.label, usage.promptTokens, usage.completionTokens);
    this.parts.finish?.(outcome, usage);
  }

  /** The first byte reached the client `ms` after the request arrived. */
  firstToken(ms: number): void {
    this.parts.firstToken?.(ms);
  }

  /**
   * The route is done with the request. One that never sent a job has no terminal event to
   * settle it: its holds go back whole, and it leaves no usage record. One that did is settled
   * by its job's terminal event, which may come later (after a client left, the cancel's).
   */
  close(): void {
    if (this.dispatched || this.settled) return;
    this.settled = true;
    this.settlement.rateLimiter.settle(this.rateLimit.hold, 0);
    this.parts.finish?.('failed', undefined);
  }
}
