import fs from 'node:fs';
import path from 'node:path';

/** package.json's version, put here by the agent's single-file builds (an esbuild `define`); undefined elsewhere. */
declare const __AGENT_VERSION__: string | undefined;

/**
 * The platform version from the nearest package.json, found at run time so it works from
 * both `worker-agent/` (ts) and `dist/worker-agent/`; importing the JSON would make tsc copy
 * it into dist/, where it would be mistaken for the project root.
 */
export function readAgentVersion(start = __dirname): string {
  if (typeof __AGENT_VERSION__ === 'string') return __AGENT_VERSION__;
  for (let directory = start; ; directory = path.dirname(directory)) {
    const candidate = path.join(directory, 'package.json');
    if (fs.existsSync(candidate)) return String(JSON.parse(fs.readFileSync(candidate, 'utf8')).version ?? '0.0.0');
    if (path.dirname(directory) === directory) return '0.0.0';
  }
}
