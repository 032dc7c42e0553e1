/**
 * The CPU engine's acted-out start-up: it has no weights, so it plays the phases a GPU engine
 * goes through (download, load, warm-up) for as long as it is told, with load progress and
 * timed phases on the heartbeats exactly as a real start-up sends them. Tests and the autoscaler
 * bench's real-process replay use it to give CPU agents a GPU's start-up (docs/autoscaling.md,
 * "Cold starts"); `hang` and `fail` act out an engine that never becomes ready or exits.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { z } from 'zod';
import type { LoadProgress } from './engine';
import { EngineStartError } from './engine-start-error';
import { STARTUP_PHASE_NAMES, type StartupPhaseName, type StartupPhases } from '../startup-phases';

/** One acted-out phase: how long it takes, or `hang` (it never ends), or `fail` (the engine exits: code 3). */
export type CpuPhaseLength = number | 'hang' | 'fail';
export type CpuStartupPlan = ReadonlyArray<{ readonly name: StartupPhaseName; readonly length: CpuPhaseLength }>;

const STAGES: Record<StartupPhaseName, string> = {
  download: 'downloading the model weights',
  load: 'loading the weights into memory',
  warm_up: 'warming up the engine',
};
/** Progress steps over the whole start-up, shared out among the timed phases by their lengths. */
const STEPS = 20;

/**
 * `WORKER_STARTUP_PHASES_MS`: `download=90000,load=30000,warm_up=2000` (milliseconds; each
 * phase at most once, in the order given; `hang` or `fail` instead of a number).
 */
export const cpuStartupPlanOption = () => z.string().transform((text, context): CpuStartupPlan => {
  const plan: Array<{ name: StartupPhaseName; length: CpuPhaseLength }> = [];
  for (const part of text.split(',').map((item) => item.trim()).filter(Boolean)) {
    const match = /^([a-z_]+)=(\d{1,9}|hang|fail)$/.exec(part);
    const name = match?.[1] as StartupPhaseName | undefined;
    if (!match || !STARTUP_PHASE_NAMES.includes(name!) || plan.some((phase) => phase.name === name)) {
      context.addIssue({ code: 'custom', message: `must be phase=milliseconds pairs, each of ${STARTUP_PHASE_NAMES.join(', ')} at most once (or =hang, =fail), e.g. download=90000,load=30000,warm_up=2000; got ${JSON.stringify(part)}` });
      return z.NEVER;
    }
    plan.push({ name: name!, length: /^\d+$/.test(match[2]) ? Number(match[2]) : match[2] as 'hang' | 'fail' });
  }
  return plan;
});

/** What `WORKER_CPU_LOAD_MS` always meant: four fifths downloading, one fifth loading. */
export function legacyLoadPlan(loadMs: number): CpuStartupPlan {
  return loadMs > 0 ? [{ name: 'download', length: loadMs * 0.8 }, { name: 'load', length: loadMs * 0.2 }] : [];
}

/**
 * Plays `plan`: each phase timed in `phases`, and progress over the whole start-up weighted by
 * the phases' lengths (a `hang` phase stays at the percent it started at). Never resolves on
 * `hang`; throws EngineStartError on `fail`.
 */
export async function actOutStartup(plan: CpuStartupPlan, progress?: LoadProgress, phases?: StartupPhases): Promise<void> {
  const total = plan.reduce((sum, phase) => sum + (typeof phase.length === 'number' ? phase.length : 0), 0);
  let elapsed = 0;
  const report = (stage: string) => progress?.(total > 0 ? (elapsed * 100) / total : 0, stage);
  for (const { name, length } of plan) {
    phases?.begin(name, 'acted out by the CPU engine');
    report(STAGES[name]);
    if (length === 'fail') {
      phases?.describe(name, 'failed: acted out by the CPU engine');
      throw new EngineStartError(`simulated start-up failure in phase ${name} (WORKER_STARTUP_PHASES_MS)`);
    }
    // Nothing ends it: the agent's heartbeats (and a drain) keep running, so the control plane sees it stuck here.
    if (length === 'hang') return await new Promise<never>(() => {});
    const steps = length > 0 ? Math.max(1, Math.round((STEPS * length) / total)) : 0;
    for (let index = 0; index < steps; index += 1) {
      await sleep(length / steps);
      elapsed += length / steps;
      // The next phase's first report (or being loaded) follows the last step.
      if (index < steps - 1) report(STAGES[name]);
    }
    phases?.end(name);
  }
}
