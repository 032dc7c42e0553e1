import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import fs from 'node:fs';
import path from 'node:path';

/** The compiled agent, as the local provider runs it (`npm test` builds dist/ first). */
export const AGENT_ENTRY = path.resolve(__dirname, '../../../dist/worker-agent/main.js');

export interface AgentProcess {
  readonly child: ChildProcess;
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  stderr(): string;
  /** What it printed on stdout (the agent writes only `--help` there; tests check nothing else leaks). */
  stdout(): string;
  /** The last plain line of stderr: JSON log records (connection attempts) may follow it; the local provider reads the same. */
  lastLine(): string;
}

export function assertAgentBuilt(): void {
  if (!fs.existsSync(AGENT_ENTRY)) throw new Error(`${AGENT_ENTRY} is missing: run npx tsc -p tsconfig.json first`);
}

/**
 * `node dist/worker-agent/main.js` with only PATH and the given WORKER_* variables; what it
 * prints on stderr and stdout is kept; stdin is /dev/null unless asked to be a pipe (the local
 * provider's WORKER_EXIT_WITH_PARENT). Killed (and awaited) by the returned process's entry in `disposables`.
 */
export function spawnAgent(env: Record<string, string>, disposables: Array<() => Promise<unknown>>, options: { stdin?: 'ignore' | 'pipe' } = {}): AgentProcess {
  const child = spawn(process.execPath, [AGENT_ENTRY], { env: { PATH: process.env.PATH ?? '', ...env }, stdio: [options.stdin ?? 'ignore', 'pipe', 'pipe'] });
  let stderr = '';
  let stdout = '';
  child.stderr!.on('data', (data: Buffer) => { stderr += data.toString(); });
  child.stdout!.on('data', (data: Buffer) => { stdout += data.toString(); });
  const exited = once(child, 'exit').then(([code, signal]) => ({ code: code as number | null, signal: signal as NodeJS.Signals | null }));
  disposables.push(async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    await exited;
  });
  return { child, exited, stderr: () => stderr, stdout: () => stdout, lastLine: () => stderr.trim().split('\n').filter((line) => !line.startsWith('{')).pop() ?? '' };
}
