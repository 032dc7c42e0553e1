/**
 * What every attack of `bench:hostile` is to the process that runs it (attacker-process.ts):
 * prepared (unmeasured: uploads, connections it needs before it starts), started, and stopped
 * with a report of what it achieved and how the server answered it.
 */

/** Where an attack aims, made by the benchmark before the attacker process starts. */
export interface AttackTarget {
  readonly port: number;
  /** The attacker's keys: one per attacker workspace (the slow uploads use several workspaces). */
  readonly keys: string[];
  /** The attacker's deployments, one per key (null where the attack needs none). */
  readonly deployments: Array<{ id: string; slug: string } | null>;
  /** The catalog model the attacker deploys (the ordinary tenant's). */
  readonly modelId: string;
  /** `/d/<slug>/v1/chat/completions` of the ordinary tenant's deployment (the body bombs aim there). */
  readonly tenantChatPath: string;
}

/** Every attack's settings, from the benchmark's flags (each attack reads its own). */
export interface AttackSettings {
  readonly attackers: number;
  readonly sizes: number[];
  readonly timeoutMs: number;
  readonly nestedFileBytes: number;
  readonly nestedLineBytes: number;
  readonly nestedDepths: number[];
  readonly nestedBatchesInFlight: number;
  readonly subscriptions: number;
  readonly subscriptionSockets: number;
  readonly subscriptionField: 'replicaLoad' | 'deploymentUpdated';
  readonly subscriptionUpdateMs: number;
  readonly usageAliases: number;
  readonly usageParallel: number;
  readonly downloads: number;
  readonly downloadBytes: number;
  readonly slowBodies: number;
  readonly slowBodyBytes: number;
  readonly slowBodyFillMs: number;
  readonly halfOpen: number;
  readonly halfOpenPartialShare: number;
  readonly localDeployments: number;
  readonly localReplicas: number;
}

export interface AttackJob {
  readonly attack: string;
  readonly target: AttackTarget;
  readonly settings: AttackSettings;
  /** The process stops its attack and exits this long after `go` whatever happens. */
  readonly deadlineMs: number;
  /** Ramp-ups (opening 20,000 connections, 40,000 subscriptions) give up after this long. */
  readonly rampMs: number;
}

export interface AttackReport {
  /** What the attacker achieved and held, in its own words: `subscriptions that received an event: 40000`. */
  readonly achieved: Record<string, number | string>;
  /** How the server answered it: `429 rate_limit_error`, `close 4403`, `error ECONNRESET`, `held` …, each with a count. */
  readonly answers: Record<string, number>;
  readonly seconds: number;
  /** Anything longer (the body bombs' per-case table). */
  readonly details?: unknown;
}

export interface HostileAttack {
  /** Unmeasured preparation (an upload the attack reuses, a query checked once). */
  prepare?(): Promise<void>;
  /** Starts the attack; resolves once it holds what it set out to hold, or can get no more. */
  go(): Promise<void>;
  /** Stops, lets go of what it holds, and says what it achieved. */
  stop(): Promise<AttackReport>;
}

/** Counts of named outcomes. */
export class Tally {
  readonly counts: Record<string, number> = {};

  add(name: string, count = 1): void {
    this.counts[name] = (this.counts[name] ?? 0) + count;
  }
}

/** An error's code (ECONNRESET, EMFILE) or message, short. */
export function errorName(error: unknown): string {
  const cause = error as NodeJS.ErrnoException;
  return cause?.code ?? String(cause?.message ?? cause).slice(0, 60);
}

/** The GraphQL or OpenAI error code of an answer, if there is one near its start. */
export function codeOf(body: string): string {
  return /"code"\s*:\s*"([^"]{1,60})"/.exec(body)?.[1] ?? (/"type"\s*:\s*"([^"]{1,60})"/.exec(body)?.[1] ?? '');
}

export const round = (value: number) => Math.round(value * 10) / 10;
export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
