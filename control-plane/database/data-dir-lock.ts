import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

/** The lock file's name in `DATA_DIR`. */
export const LOCK_FILE = 'server.lock';

/** What the lock file says about its owner. */
export interface LockOwner {
  readonly pid: number;
  /** The owner's start time as the kernel counts it (`/proc/<pid>/stat` field 22): a reused pid has another. */
  readonly startTicks: string | null;
  readonly hostname: string;
  readonly startedAt: string;
}

/** Another live server holds `DATA_DIR`: the message says which, and what to do. */
export class DataDirInUseError extends Error {
  constructor(readonly dataDir: string, readonly owner: LockOwner) {
    super(`DATA_DIR ${dataDir} is in use by another server (pid ${owner.pid}, started ${owner.startedAt}); `
      + 'stop that server first, or give this one another DATA_DIR (or a DATABASE_URL)');
  }
}

/**
 * The one server that may use a `DATA_DIR` (its embedded PostgreSQL, its secrets key): a file
 * created exclusively (`O_EXCL`), naming its owner's pid and the pid's start time. A second
 * server finds it, sees the owner alive, and refuses, touching nothing; a lock whose owner is
 * provably dead (no such pid, or the pid now belongs to a process started at another time, or
 * it names another host's process… which cannot share a local folder's PostgreSQL anyway) is
 * taken over. Only the holder may then treat a PostgreSQL still running on the folder as an
 * orphan and stop it (embedded-database.ts).
 */
export class DataDirLock {
  private released = false;
  private readonly onExit = () => this.release();

  private constructor(private readonly file: string, private readonly owner: LockOwner) {
    // A crash that skips stop() still leaves no lock behind when the process exits normally.
    process.once('exit', this.onExit);
  }

  /** Takes the lock on `dataDir` (creating the folder), or throws DataDirInUseError. */
  static acquire(dataDir: string, pid = process.pid): DataDirLock {
    fs.mkdirSync(dataDir, { recursive: true });
    const file = path.join(dataDir, LOCK_FILE);
    const owner: LockOwner = { pid, startTicks: startTicksOf(pid), hostname: os.hostname(), startedAt: new Date().toISOString() };
    // Twice at most: once, and once more after removing a dead owner's lock (if another server
    // removed it and took it meanwhile, the second exclusive create fails and names that one).
    for (let attempt = 0; ; attempt++) {
      try {
        fs.writeFileSync(file, `${JSON.stringify(owner)}\n`, { flag: 'wx', mode: 0o600 });
        return new DataDirLock(file, owner);
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
      }
      const holder = readOwner(file);
      if (holder && ownerAlive(holder)) throw new DataDirInUseError(dataDir, holder);
      if (attempt > 0) throw new DataDirInUseError(dataDir, holder ?? { pid: 0, startTicks: null, hostname: '?', startedAt: '?' });
      fs.rmSync(file, { force: true });
    }
  }

  /** Removes the lock if it is still this process's (idempotent). */
  release(): void {
    if (this.released) return;
    this.released = true;
    process.off('exit', this.onExit);
    const holder = readOwner(this.file);
    if (holder && holder.pid === this.owner.pid && holder.startTicks === this.owner.startTicks) fs.rmSync(this.file, { force: true });
  }
}

/** The lock's owner, or null when the file is gone or unreadable (a crash mid-write: no owner to wait for). */
function readOwner(file: string): LockOwner | null {
  try {
    const owner = JSON.parse(fs.readFileSync(file, 'utf8')) as LockOwner;
    return Number.isInteger(owner.pid) && owner.pid > 0 ? owner : null;
  } catch {
    return null;
  }
}

/**
 * Alive: the pid exists, is not a zombie (dead, waiting to be reaped: an init that reaps late
 * leaves a killed server's pid "existing"), and, where the kernel tells start times, started
 * when the lock says.
 */
export function ownerAlive(owner: LockOwner): boolean {
  if (owner.hostname !== os.hostname()) return true;
  if (!processRunning(owner.pid)) return false;
  const ticks = startTicksOf(owner.pid);
  return owner.startTicks === null || ticks === null || ticks === owner.startTicks;
}

/**
 * The pid runs: it exists (or one we may not signal does) and is not a zombie. A zombie is dead,
 * only not reaped yet: in a container whose init reaps late, a killed process stays one a while.
 */
export function processRunning(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EPERM') return false;
  }
  const state = statOf(pid)?.state;
  return state !== 'Z' && state !== 'X';
}

/** Field 22 of `/proc/<pid>/stat` (the start time), or null off Linux. */
export function startTicksOf(pid: number): string | null {
  return statOf(pid)?.startTicks ?? null;
}

/** The state (field 3) and start time (field 22) of `/proc/<pid>/stat`, read after the parenthesised command, which may hold spaces. */
function statOf(pid: number): { state: string; startTicks: string | null } | null {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return { state: fields[0], startTicks: fields[19] ?? null };
  } catch {
    return null;
  }
}
