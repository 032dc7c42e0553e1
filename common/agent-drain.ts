/**
 * How long a draining worker agent lets its in-flight jobs run before failing them
 * (`WORKER_DRAIN_TIMEOUT_MS`). The control plane's local provider reads the same default: a
 * replica given back by a scale-down must be allowed to finish what it serves before its process
 * is killed, or those requests are lost.
 */
export const DEFAULT_AGENT_DRAIN_TIMEOUT_MS = 30_000;

/** The drain timeout an agent started with `env` uses (its WORKER_DRAIN_TIMEOUT_MS, else the default). */
export function agentDrainTimeoutMs(env: Readonly<Record<string, string | undefined>>): number {
  const value = Number(env.WORKER_DRAIN_TIMEOUT_MS);
  return env.WORKER_DRAIN_TIMEOUT_MS !== undefined && Number.isInteger(value) && value >= 0 ? value : DEFAULT_AGENT_DRAIN_TIMEOUT_MS;
}
