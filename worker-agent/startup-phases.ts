/**
 * The engine's start-up, timed phase by phase (proto/PROTOCOL.md "Start-up phases"): the weights'
 * download (or the cache hit that skipped it), the engine's load, and its warm-up (a first tiny
 * request). Engines mark the phases they go through; the agent sends the list on its heartbeats
 * until the engine is ready, so a replica that never becomes ready still shows where it stuck.
 */
import type { StartupPhase } from '../proto/worker/v1/index';

/** The phases an agent reports, in the order an engine goes through them. */
export const STARTUP_PHASE_NAMES = ['download', 'load', 'warm_up'] as const;
export type StartupPhaseName = (typeof STARTUP_PHASE_NAMES)[number];

/** What a finished phase says beyond its time. */
export interface PhaseOutcome {
  /** For people: "cache hit", "fetched 1.2 GB", "skipped: the engine answered 404". No URL or secret. */
  readonly detail?: string;
  /** The download phase: the model's bytes, fetched or found in the cache. */
  readonly bytes?: number;
}

interface Phase {
  readonly name: StartupPhaseName;
  readonly startedAt: number;
  endedAt: number | null;
  detail: string;
  bytes: number;
}

export class StartupPhases {
  private readonly phases: Phase[] = [];

  /**
   * @param onChange told when a phase begins or ends (the agent sends a heartbeat at once)
   * @param now the clock phases are timed by
   */
  constructor(private readonly onChange: () => void = () => {}, private readonly now: () => number = Date.now) {}

  /** A phase starts now. Beginning a phase again (a retried probe) starts it over. */
  begin(name: StartupPhaseName, detail = ''): void {
    const index = this.phases.findIndex((phase) => phase.name === name);
    const phase: Phase = { name, startedAt: this.now(), endedAt: null, detail, bytes: 0 };
    if (index >= 0) this.phases[index] = phase;
    else this.phases.push(phase);
    this.onChange();
  }

  /** The phase is over (a phase never begun is recorded as taking no time). */
  end(name: StartupPhaseName, outcome: PhaseOutcome = {}): void {
    let phase = this.phases.find((candidate) => candidate.name === name);
    if (!phase) {
      phase = { name, startedAt: this.now(), endedAt: null, detail: '', bytes: 0 };
      this.phases.push(phase);
    }
    phase.endedAt = this.now();
    if (outcome.detail !== undefined) phase.detail = outcome.detail;
    if (outcome.bytes !== undefined) phase.bytes = outcome.bytes;
    this.onChange();
  }

  /** A phase still running changes what it says (how far a download is). No heartbeat is sent for it. */
  describe(name: StartupPhaseName, detail: string): void {
    const phase = this.phases.find((candidate) => candidate.name === name && candidate.endedAt === null);
    if (phase) phase.detail = detail;
  }

  /**
   * Runs `work` as the phase: begun now, ended when it resolves (with what `outcome` reads of
   * its result). A failure leaves the phase unfinished, saying why: that is where start-up stuck.
   */
  async time<T>(name: StartupPhaseName, work: () => Promise<T>, outcome: (result: T) => PhaseOutcome = () => ({})): Promise<T> {
    this.begin(name);
    let result: T;
    try {
      result = await work();
    } catch (error) {
      this.describe(name, `failed: ${(error as Error)?.message ?? String(error)}`.slice(0, 300));
      this.onChange();
      throw error;
    }
    this.end(name, outcome(result));
    return result;
  }

  /** The phase the start-up is in now, or null (none begun, or all over). */
  get current(): StartupPhaseName | null {
    return this.phases.find((phase) => phase.endedAt === null)?.name ?? null;
  }

  /** Every phase so far as the heartbeat carries it; a running phase's duration is its time so far. */
  frames(): StartupPhase[] {
    const now = this.now();
    return this.phases.map((phase) => ({
      name: phase.name,
      startedUnixMs: phase.startedAt,
      durationMs: Math.max(0, Math.round((phase.endedAt ?? now) - phase.startedAt)),
      done: phase.endedAt !== null,
      detail: phase.detail,
      bytes: phase.bytes,
    }));
  }
}
