/**
 * The agent's log of its adapters: one line per load (with how long it took), per unload (and
 * why), per failure (with the reason clients get). The heartbeat carries residency to the
 * control plane; these lines are what an operator reading the agent's output sees of it. Only
 * names: the source is a presigned URL (a credential) and the local copy's path says nothing an
 * operator needs, and the failure's reason is the client-safe message (adapter-failure.ts).
 */
import type { AgentLogger } from '../agent-logger';
import type { AdapterEvent, AdapterResidencyView } from './adapter-slots';

export function logAdapterEvents(adapters: AdapterResidencyView, logger: AgentLogger): void {
  adapters.onEvent((event) => writeAdapterEvent(logger, event));
}

export function writeAdapterEvent(logger: AgentLogger, event: AdapterEvent): void {
  const adapter = { adapter: event.displayName, engineName: event.name };
  switch (event.kind) {
    case 'loaded':
      logger.info({ ...adapter, loadMs: event.loadMs }, 'adapter loaded');
      return;
    case 'unloaded':
      logger.info({ ...adapter, why: event.why }, 'adapter unloaded');
      return;
    case 'failed':
      logger.warn({ ...adapter, loadMs: event.loadMs, reason: event.reason }, 'adapter load failed');
      return;
  }
}
