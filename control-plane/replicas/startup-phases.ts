/**
 * A replica's start-up as the control plane keeps it (replica.entity.ts `startupPhases`): its own
 * `provision` phase (placement to the agent's Hello), then the phases the agent timed and sent on
 * its heartbeats (proto/PROTOCOL.md "Start-up phases"). Agent text is bounded before it is stored.
 */
import type { StartupPhase } from '../../proto/worker/v1';
import type { StoredStartupPhase } from './replica.entity';

/** The control plane's phase: from placement until the agent said Hello. */
export const PROVISION_PHASE = 'provision';

/** What one agent may store: a handful of phases with short names and details. */
const MAX_PHASES = 16;
const MAX_DETAIL = 300;
const PHASE_NAME = /^[a-z][a-z_]{0,31}$/;

/** Placement (`placedAt`) to the agent's Hello (`joinedAt`): a process started, or a pod scheduled with its images pulled. */
export function provisionPhase(placedAt: Date, joinedAt: Date, provider: string): StoredStartupPhase {
  return {
    name: PROVISION_PHASE, startedAt: placedAt.toISOString(), durationMs: Math.max(0, joinedAt.getTime() - placedAt.getTime()),
    done: true, detail: `${provider}: placed until its agent said Hello`, bytes: 0,
  };
}

/** The agent's phases as stored: unknown-looking names dropped, details clipped, at most MAX_PHASES. */
export function storedAgentPhases(phases: readonly StartupPhase[]): StoredStartupPhase[] {
  return phases.filter((phase) => PHASE_NAME.test(phase.name) && phase.name !== PROVISION_PHASE).slice(0, MAX_PHASES).map((phase) => ({
    name: phase.name,
    startedAt: new Date(Number(phase.startedUnixMs) || 0).toISOString(),
    durationMs: Math.max(0, Math.round(Number(phase.durationMs) || 0)),
    done: phase.done === true,
    detail: String(phase.detail ?? '').replace(/[\u0000-\u001f\u007f]+/g, ' ').slice(0, MAX_DETAIL),
    bytes: Math.max(0, Number(phase.bytes) || 0),
  }));
}

/**
 * What changed enough to write: a phase begun or ended, or its detail. A running phase's
 * duration grows with every heartbeat and is written with the next such change (or readiness).
 */
export function phasesSignature(phases: readonly StartupPhase[] | undefined): string {
  return (phases ?? []).map((phase) => `${phase.name}:${phase.done ? 1 : 0}:${phase.detail}`).join('|');
}

/** The time from placement to ready, or null while it never was ready. */
export function startupMillis(createdAt: Date, readyAt: Date | null): number | null {
  return readyAt ? Math.max(0, readyAt.getTime() - createdAt.getTime()) : null;
}
