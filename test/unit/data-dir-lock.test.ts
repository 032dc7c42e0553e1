/**
 * DataDirLock: one live owner per DATA_DIR. A lock whose owner is provably dead is taken over;
 * a live owner (this process stands in for one) is never displaced, nor one that cannot be
 * proven dead (another host's, or a pid whose start time cannot be read).
 */
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { DataDirInUseError, DataDirLock, LOCK_FILE, startTicksOf } from '../../control-plane/database/data-dir-lock';

describe('DataDirLock', () => {
  let dataDir: string;
  const lockFile = () => path.join(dataDir, LOCK_FILE);
  const writeLock = (owner: Record<string, unknown>) => fs.writeFileSync(lockFile(), JSON.stringify(owner));

  beforeEach(() => {
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'lock-'));
  });

  afterEach(() => {
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  test('the first taker writes its pid and start time; a second is refused naming the first; release removes it', () => {
    const lock = DataDirLock.acquire(dataDir);
    const owner = JSON.parse(fs.readFileSync(lockFile(), 'utf8'));
    expect(owner).toMatchObject({ pid: process.pid, startTicks: startTicksOf(process.pid), hostname: os.hostname() });
    expect(() => DataDirLock.acquire(dataDir)).toThrow(DataDirInUseError);
    expect(() => DataDirLock.acquire(dataDir)).toThrow(`is in use by another server (pid ${process.pid}`);
    lock.release();
    expect(fs.existsSync(lockFile())).toBe(false);
    DataDirLock.acquire(dataDir).release();
  });

  test('a dead owner\'s lock is taken over', () => {
    // A pid that existed and is gone: a child that ran and exited.
    const dead = spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))']).stdout.toString();
    writeLock({ pid: Number(dead), startTicks: '1', hostname: os.hostname(), startedAt: 'then' });
    const lock = DataDirLock.acquire(dataDir);
    expect(JSON.parse(fs.readFileSync(lockFile(), 'utf8')).pid).toBe(process.pid);
    lock.release();
  });

  test('a live pid that started at another time (the pid was reused) is a dead owner', () => {
    writeLock({ pid: process.pid, startTicks: `${startTicksOf(process.pid)}0`, hostname: os.hostname(), startedAt: 'then' });
    DataDirLock.acquire(dataDir).release();
  });

  test('another host\'s lock, and a live pid, are never taken over', () => {
    writeLock({ pid: 999_999_999, startTicks: '1', hostname: `${os.hostname()}-other`, startedAt: 'then' });
    expect(() => DataDirLock.acquire(dataDir)).toThrow(DataDirInUseError);
    writeLock({ pid: process.pid, startTicks: startTicksOf(process.pid), hostname: os.hostname(), startedAt: 'now' });
    expect(() => DataDirLock.acquire(dataDir)).toThrow(DataDirInUseError);
  });

  test('an unreadable lock (a crash mid-write) has no owner to wait for: taken over', () => {
    fs.writeFileSync(lockFile(), '{"pid":');
    DataDirLock.acquire(dataDir).release();
  });

  test('release leaves a lock that is no longer its own', () => {
    const lock = DataDirLock.acquire(dataDir);
    writeLock({ pid: 1, startTicks: startTicksOf(1), hostname: os.hostname(), startedAt: 'later' });
    lock.release();
    expect(JSON.parse(fs.readFileSync(lockFile(), 'utf8')).pid).toBe(1);
  });
});

describe('a zombie owner (killed, not yet reaped)', () => {
  test('is dead: its lock is taken over', async () => {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'lock-'));
    // A child that exits while this process does not reap it yet: node reaps on its event loop, so poll /proc before that turn.
    const child = spawn('sh', ['-c', 'exit 0']);
    const pid = child.pid!;
    const startTicks = startTicksOf(pid);
    fs.writeFileSync(path.join(dataDir, LOCK_FILE), JSON.stringify({ pid, startTicks, hostname: os.hostname(), startedAt: 'then' }));
    // Busy-wait (no event-loop turn, so no reaping) until the kernel shows it as a zombie.
    const until = Date.now() + 5_000;
    let state = '';
    while (Date.now() < until) {
      try {
        const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
        state = stat.slice(stat.lastIndexOf(')') + 2).split(' ')[0];
      } catch {
        state = 'gone';
      }
      if (state === 'Z' || state === 'gone') break;
    }
    expect(['Z', 'gone']).toContain(state);
    DataDirLock.acquire(dataDir).release();
    await new Promise((resolve) => child.once('exit', resolve).once('error', resolve));
    fs.rmSync(dataDir, { recursive: true, force: true });
  });
});
