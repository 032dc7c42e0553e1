/**
 * One DATA_DIR, one server (issue: a second start took the running server's PostgreSQL for an
 * orphan and stopped it; the first then answered /readyz 503 for good and hung at SIGTERM).
 * Real processes on the embedded PostgreSQL, one folder for the whole file (initdb runs once):
 * a second server refuses and touches nothing; after a kill -9 the next server takes the folder
 * over and stops the orphaned PostgreSQL; a PostgreSQL that dies is restarted; a shutdown that
 * hangs is forced at SHUTDOWN_TIMEOUT_MS.
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { isRunning, killQuietly, within } from './support/processes';
import { freshDataDir, ServerProcess } from './support/server-process';

const MAIN = path.resolve(__dirname, '../../dist/gateway/main.js');
/** The embedded PostgreSQL's first start runs initdb: slower than a start over a test database. */
const READY_MS = 60_000;
const EXIT_DATA_DIR_IN_USE = 3;

/** The postmaster's pid, from its lock file in the data directory. */
function postgresPid(dataDir: string): number {
  return Number(fs.readFileSync(path.join(dataDir, 'postgres', 'postmaster.pid'), 'utf8').split('\n')[0]);
}

async function ready(url: string): Promise<boolean> {
  return (await fetch(`${url}/readyz`)).status === 200;
}

/** `node dist/gateway/main.js` on `dataDir` with free ports, run to its exit: its code and output. */
async function runToExit(dataDir: string, timeoutMs: number, env: Record<string, string> = {}): Promise<{ code: number | null; output: string }> {
  const child = spawn(process.execPath, [MAIN], {
    env: { PATH: process.env.PATH, DATA_DIR: dataDir, PORT: '0', GRPC_PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'warn', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (part) => (output += part));
  child.stderr.on('data', (part) => (output += part));
  const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
  const code = await new Promise<number | null>((resolve) => child.once('exit', (exitCode) => resolve(exitCode)));
  clearTimeout(timer);
  return { code, output };
}

describe('DATA_DIR: one server per folder, its embedded PostgreSQL watched', () => {
  const dataDir = freshDataDir();
  const servers: ServerProcess[] = [];

  afterEach(async () => {
    for (const server of servers.splice(0)) await server.dispose();
  });

  afterAll(() => {
    try {
      killQuietly(postgresPid(dataDir));
    } catch {
      // No postmaster.pid: nothing runs on the folder.
    }
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  it('a second server on the same folder refuses with exit code 3 and a clear message, and the first serves on untouched', async () => {
    const first = await ServerProcess.start({ databaseUrl: undefined, dataDir, readyTimeoutMs: READY_MS, env: { LOCAL_AGENTS: 'false' } });
    servers.push(first);
    const postgres = postgresPid(dataDir);
    const lock = JSON.parse(fs.readFileSync(path.join(dataDir, 'server.lock'), 'utf8')) as { pid: number };
    expect(lock.pid).toBe(first.pid);

    const second = await runToExit(dataDir, 20_000);
    expect(second.code).toBe(EXIT_DATA_DIR_IN_USE);
    // A setting it refuses is exit 2, named, before it touches the folder either.
    const badSetting = await runToExit(dataDir, 20_000, { SHUTDOWN_TIMEOUT_MS: 'soon' });
    expect(badSetting.code).toBe(2);
    expect(badSetting.output).toContain('SHUTDOWN_TIMEOUT_MS');
    expect(second.output).toContain(`is in use by another server (pid ${first.pid}`);
    expect(isRunning(postgres)).toBe(true);
    expect(postgresPid(dataDir)).toBe(postgres);
    expect(await ready(first.url)).toBe(true);
    expect(JSON.parse(fs.readFileSync(path.join(dataDir, 'server.lock'), 'utf8')).pid).toBe(first.pid);

    // A clean stop gives the folder back: no lock left behind.
    expect(await first.signal('SIGTERM', 30_000)).toBe(0);
    expect(fs.existsSync(path.join(dataDir, 'server.lock'))).toBe(false);
    expect(isRunning(postgres)).toBe(false);
  }, 120_000);

  it('after kill -9 of the server, the next one takes the folder over (its owner is provably dead) and stops the orphaned PostgreSQL', async () => {
    const first = await ServerProcess.start({ databaseUrl: undefined, dataDir, readyTimeoutMs: READY_MS, env: { LOCAL_AGENTS: 'false' } });
    servers.push(first);
    const orphan = postgresPid(dataDir);
    first.kill9();
    await within(() => !isRunning(first.pid), 5_000, 'the server to die');
    // Its PostgreSQL runs on, owned by no one, with the dead server's lock still in the folder.
    expect(isRunning(orphan)).toBe(true);
    expect(fs.existsSync(path.join(dataDir, 'server.lock'))).toBe(true);

    const next = await ServerProcess.start({ databaseUrl: undefined, dataDir, readyTimeoutMs: READY_MS, env: { LOCAL_AGENTS: 'false' } });
    servers.push(next);
    expect(isRunning(orphan)).toBe(false);
    expect(postgresPid(dataDir)).not.toBe(orphan);
    expect(await ready(next.url)).toBe(true);
    expect(JSON.parse(fs.readFileSync(path.join(dataDir, 'server.lock'), 'utf8')).pid).toBe(next.pid);
  }, 120_000);

  it('a PostgreSQL that dies is restarted and /readyz recovers; with no restarts left the server exits 4 for its supervisor', async () => {
    const server = await ServerProcess.start({
      databaseUrl: undefined, dataDir, readyTimeoutMs: READY_MS, env: { LOCAL_AGENTS: 'false', EMBEDDED_DATABASE_WATCH_MS: '100', LOG_LEVEL: 'warn' },
    });
    servers.push(server);
    const before = postgresPid(dataDir);
    killQuietly(before);
    await within(async () => {
      const pid = (() => {
        try {
          return postgresPid(dataDir);
        } catch {
          return before;
        }
      })();
      return pid !== before && isRunning(pid) && await ready(server.url);
    }, 30_000, 'a restarted PostgreSQL and /readyz 200', 100);
    expect(server.output()).toContain('the embedded PostgreSQL died and was restarted');
    expect(await server.signal('SIGTERM', 30_000)).toBe(0);

    const noRestarts = await ServerProcess.start({
      databaseUrl: undefined, dataDir, readyTimeoutMs: READY_MS,
      env: { LOCAL_AGENTS: 'false', EMBEDDED_DATABASE_WATCH_MS: '100', EMBEDDED_DATABASE_RESTARTS: '0', SHUTDOWN_TIMEOUT_MS: '5000' },
    });
    servers.push(noRestarts);
    const exited = new Promise<number | null>((resolve) => noRestarts.onExit(resolve));
    killQuietly(postgresPid(dataDir));
    expect(await exited).toBe(4);
    expect(noRestarts.output()).toContain('could not be restarted');
  }, 180_000);

  it('a shutdown that hangs (its database stopped answering) is forced at SHUTDOWN_TIMEOUT_MS: exit 1, nothing left running', async () => {
    const server = await ServerProcess.start({
      databaseUrl: undefined, dataDir, readyTimeoutMs: READY_MS, env: { LOCAL_AGENTS: 'false', SHUTDOWN_TIMEOUT_MS: '1500', EMBEDDED_DATABASE_RESTARTS: '0', LOG_LEVEL: 'info' },
    });
    servers.push(server);
    const postgres = postgresPid(dataDir);
    // Frozen, not dead: every query waits, so the drain's last flush and the pool's end never finish.
    killQuietly(postgres, 'SIGSTOP');
    try {
      const startedAt = performance.now();
      expect(await server.signal('SIGTERM', 10_000)).toBe(1);
      const tookMs = performance.now() - startedAt;
      expect(tookMs).toBeGreaterThanOrEqual(1_400);
      expect(tookMs).toBeLessThan(8_000);
      expect(server.output()).toContain('past SHUTDOWN_TIMEOUT_MS');
      expect(isRunning(server.pid)).toBe(false);
    } finally {
      killQuietly(postgres, 'SIGCONT');
      killQuietly(postgres);
    }
  }, 120_000);
});
