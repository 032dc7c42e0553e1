/**
 * What the kernel says about processes (Linux /proc): children of a pid, and whether a pid
 * still runs. Fault tests look at real process trees, not at what the server believes.
 */
import fs from 'node:fs';

interface ProcessStat {
  readonly pid: number;
  readonly parentPid: number;
  /** R, S, D, T, Z (zombie: dead, waiting to be reaped), X … */
  readonly state: string;
}

function statOf(pid: number): ProcessStat | undefined {
  let text: string;
  try {
    text = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return undefined;
  }
  // The command name (field 2) is in parentheses and may hold spaces or parentheses itself.
  const fields = text.slice(text.lastIndexOf(')') + 2).split(' ');
  return { pid, state: fields[0], parentPid: Number(fields[1]) };
}

/** The pid runs: it exists and is not a zombie (an init that does not reap leaves the dead as zombies). */
export function isRunning(pid: number): boolean {
  const stat = statOf(pid);
  return stat !== undefined && stat.state !== 'Z' && stat.state !== 'X';
}

export function parentOf(pid: number): number | undefined {
  return statOf(pid)?.parentPid;
}

export function commandLineOf(pid: number): string {
  try {
    return fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').join(' ').trim();
  } catch {
    return '';
  }
}

/** Running children of `parentPid`, optionally only those whose command line contains `match`. */
export function childrenOf(parentPid: number, match?: string): number[] {
  const children: number[] = [];
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const stat = statOf(Number(entry));
    if (!stat || stat.parentPid !== parentPid || stat.state === 'Z') continue;
    if (match && !commandLineOf(stat.pid).includes(match)) continue;
    children.push(stat.pid);
  }
  return children;
}

/** SIGKILL, ignoring a pid that is already gone. */
export function killQuietly(pid: number | undefined, signal: NodeJS.Signals = 'SIGKILL'): void {
  if (pid === undefined) return;
  try {
    process.kill(pid, signal);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ESRCH') throw error;
  }
}

/** Polls until `check` holds; resolves with the milliseconds it took, or rejects after `timeoutMs`. */
export async function within(check: () => boolean | Promise<boolean>, timeoutMs: number, what: string, intervalMs = 10): Promise<number> {
  const startedAt = performance.now();
  for (;;) {
    if (await Promise.resolve(check()).catch(() => false)) return performance.now() - startedAt;
    if (performance.now() - startedAt > timeoutMs) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
}
