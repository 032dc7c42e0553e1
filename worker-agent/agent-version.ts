import { platformVersion } from '../common/agent-binary';

/** package.json's version, put here by the agent's single-file builds (an esbuild `define`); undefined elsewhere. */
declare const __AGENT_VERSION__: string | undefined;

/**
 * The platform version: the one built into a single-file agent, else the nearest package.json's,
 * found at run time (common/agent-binary.ts) so it works from both `worker-agent/` and `dist/`.
 */
export function readAgentVersion(start = __dirname): string {
  if (typeof __AGENT_VERSION__ === 'string') return __AGENT_VERSION__;
  return platformVersion(start);
}
