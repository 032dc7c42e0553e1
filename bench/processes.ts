/** CPU time and memory of processes, read from /proc (Linux), and process-tree helpers. */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';

const TICKS_PER_SECOND = Number(execFileSync('getconf', ['CLK_TCK']).toString().trim()) || 100;

/** utime + stime of a process, in microseconds (0 once it has gone). */
export function cpuMicros(pid: number): number {
  try {
    const fields = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
    return ((Number(fields[11]) + Number(fields[12])) * 1_000_000) / TICKS_PER_SECOND;
  } catch {
    return 0;
  }
}

export function rssBytes(pid: number): number {
  try {
    const line = fs.readFileSync(`/proc/${pid}/status`, 'utf8').split('\n').find((entry) => entry.startsWith('VmRSS:'));
    return line ? Number(line.split(/\s+/)[1]) * 1024 : 0;
  } catch {
    return 0;
  }
}

export function commandOf(pid: number): string {
  try {
    return fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').join(' ').trim();
  } catch {
    return '';
  }
}

/** Every process below `pid` (children, grandchildren, …). */
export function descendants(pid: number): number[] {
  const parents = new Map<number, number>();
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const ppid = Number(fs.readFileSync(`/proc/${entry}/stat`, 'utf8').split(') ')[1].split(' ')[1]);
      parents.set(Number(entry), ppid);
    } catch {
      // the process ended while we looked
    }
  }
  const found: number[] = [];
  const queue = [pid];
  while (queue.length) {
    const current = queue.shift()!;
    for (const [child, parent] of parents) if (parent === current) { found.push(child); queue.push(child); }
  }
  return found;
}

/** Pins processes (all their threads) to a CPU list such as "1"; a no-op when `cpus` is null. */
export function pin(pids: number[], cpus: string | null): void {
  if (!cpus) return;
  for (const pid of pids) {
    try {
      execFileSync('taskset', ['-a', '-c', '-p', cpus, String(pid)], { stdio: 'ignore' });
    } catch {
      // gone already
    }
  }
}

/** Spawns a command, optionally under `taskset -c cpus`. */
export function spawnPinned(cpus: string | null, command: string, args: string[], options: Parameters<typeof spawn>[2] = {}): ChildProcess {
  return cpus ? spawn('taskset', ['-c', cpus, command, ...args], options) : spawn(command, args, options);
}

/** Load generators running now (`run`), so an interrupted benchmark can stop them. */
export const runningCommands = new Set<ChildProcess>();

/** Runs a command to completion and returns its stdout. */
export function run(cpus: string | null, command: string, args: string[], env: NodeJS.ProcessEnv = process.env): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawnPinned(cpus, command, args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
    runningCommands.add(child);
    child.on('exit', () => runningCommands.delete(child));
    let stdout = '';
    let stderr = '';
    child.stdout!.on('data', (part) => (stdout += part));
    child.stderr!.on('data', (part) => (stderr += part));
    child.on('error', reject);
    child.on('exit', (code) => (code === 0 ? resolve(stdout) : reject(new Error(`${command} exited ${code}: ${(stderr || stdout).slice(-500)}`))));
  });
}

export function hasCommand(command: string): boolean {
  try {
    execFileSync('sh', ['-c', `command -v ${command}`], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

/** SIGKILL to a whole process group (a detached server and what it spawned). */
export function killGroup(pgid: number): void {
  try {
    process.kill(-pgid, 'SIGKILL');
  } catch {
    // the group is empty
  }
}

/**
 * Stops a detached server started by a benchmark: SIGINT (it drains its agents and stops its
 * embedded PostgreSQL), SIGKILL to its group after 30 s, then to any straggler of its tree.
 */
export async function stopServerTree(child: ChildProcess, pid: number): Promise<void> {
  const tree = [pid, ...descendants(pid)];
  if (child.exitCode === null && child.signalCode === null) {
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGINT');
    const timer = setTimeout(() => killGroup(pid), 30_000);
    await exited;
    clearTimeout(timer);
  }
  await new Promise((resolve) => setTimeout(resolve, 300));
  killGroup(pid);
  for (const member of tree) {
    try {
      process.kill(member, 'SIGKILL');
    } catch {
      // gone, as it should be
    }
  }
}

/** CPU time by process: the role each process of this benchmark plays, and its microseconds so far. */
export type CpuSnapshot = Map<number, { role: string; micros: number }>;

/**
 * CPU time of every process this benchmark started, by role (`roleOf` names the server pids;
 * agents and PostgreSQL are told by their command line), and of this process (the client).
 */
export function cpuByRole(roleOf: (pid: number) => string | undefined, roles: { agents: string; servers?: string }): CpuSnapshot {
  const snapshot: CpuSnapshot = new Map();
  for (const pid of descendants(process.pid)) {
    const command = commandOf(pid);
    const role = roleOf(pid) ?? (command.includes('worker-agent/main.js') ? roles.agents : command.includes('postgres') ? 'postgres' : 'other');
    snapshot.set(pid, { role, micros: cpuMicros(pid) });
  }
  const usage = process.cpuUsage();
  snapshot.set(process.pid, { role: 'client', micros: usage.user + usage.system });
  return snapshot;
}

/** Cores each role used between two snapshots `seconds` apart (2 decimals). */
export function coresBetween(before: CpuSnapshot, after: CpuSnapshot, seconds: number): Record<string, number> {
  const cores: Record<string, number> = {};
  for (const [pid, { role, micros }] of after) {
    const start = before.get(pid);
    if (!start) continue;
    cores[role] = (cores[role] ?? 0) + (micros - start.micros) / 1e6 / seconds;
  }
  return Object.fromEntries(Object.entries(cores).map(([role, value]) => [role, Math.round(value * 100) / 100]));
}

/** The whole machine's CPU ticks (/proc/stat): busy, stolen and total. */
export function machineTicks() {
  const fields = fs.readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1).map(Number);
  const [user, nice, system, , , irq, softirq, steal] = fields;
  return { busy: user + nice + system + irq + softirq, steal, total: fields.slice(0, 8).reduce((sum, value) => sum + value, 0) };
}

/**
 * Waits for `pattern` in what a server process printed so far (`output`, read every 100 ms).
 * Throws with the end of that output when the process exits first or `timeoutMs` passes;
 * `who` names the server in those errors.
 */
export async function waitForOutput(child: ChildProcess, output: () => string, pattern: RegExp, timeoutMs: number, what: string, who = 'the server'): Promise<RegExpExecArray> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const match = pattern.exec(output());
    if (match) return match;
    if (child.exitCode !== null || child.signalCode !== null) throw new Error(`${what}: ${who} exited: ${output().slice(-2000)}`);
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}; ${who} said: ${output().slice(-2000)}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}
