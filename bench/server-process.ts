/**
 * One platform server (`dist/gateway/main.js`) as its own process for a benchmark: its own
 * data directory and embedded PostgreSQL (or `databaseUrl`), started on free ports, ready once
 * it printed the first-run banner with the API key.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { descendants } from './processes';
import { freePort, PROJECT_ROOT } from './targets';
import { graphqlCall } from './graphql-call';

export interface ServerProcessOptions {
  /** Prefix of the temporary data directory. */
  readonly name: string;
  /** Server configuration over the benchmark defaults. */
  readonly env: Record<string, string>;
  /** External PostgreSQL; otherwise an embedded one on a free port. */
  readonly databaseUrl?: string;
  readonly readyTimeoutMs?: number;
  /** Called as soon as the process is spawned with a way to kill it (and what it started), so a benchmark interrupted during the start can stop it. */
  readonly onSpawn?: (kill: () => void) => void;
}

export class ServerProcess {
  private constructor(
    private readonly child: ChildProcess,
    private readonly dataDir: string,
    readonly baseUrl: string,
    /** The workspace API key the first start printed. */
    readonly key: string,
    readonly databaseUrl: string,
    /** Everything the server printed so far. */
    readonly output: () => string,
  ) {}

  static async start(options: ServerProcessOptions): Promise<ServerProcess> {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), `${options.name}-`));
    // The embedded PostgreSQL runs as another user when started as root: it must read the directory.
    fs.chmodSync(dataDir, 0o755);
    const port = await freePort();
    const databasePort = await freePort();
    // BENCH_SERVER_NODE_ARGS (e.g. "--cpu-prof --cpu-prof-dir=/tmp/prof") profiles the server; LOCAL_AGENT_NODE_ARGS in `env` its agents.
    const nodeArgs = (process.env.BENCH_SERVER_NODE_ARGS ?? '').split(' ').filter(Boolean);
    const child = spawn(process.execPath, [...nodeArgs, path.join(PROJECT_ROOT, 'dist/gateway/main.js')], {
      env: {
        PATH: process.env.PATH, DATA_DIR: dataDir, PORT: String(port), HOST: '127.0.0.1', GRPC_PORT: '0', GRPC_HOST: '127.0.0.1', LOG_LEVEL: 'warn',
        ...(options.databaseUrl ? { DATABASE_URL: options.databaseUrl } : { EMBEDDED_DATABASE_PORT: String(databasePort) }),
        ...options.env,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout!.on('data', (part) => (output += part));
    child.stderr!.on('data', (part) => (output += part));
    const kill = () => killTree(child);
    options.onSpawn?.(kill);
    try {
      await until(() => /API key:\s+mk-/.test(output) || child.exitCode !== null, options.readyTimeoutMs ?? 120_000, 'the server banner');
      if (child.exitCode !== null) throw new Error(`server exited: ${output}`);
    } catch (error) {
      kill();
      fs.rmSync(dataDir, { recursive: true, force: true });
      throw error;
    }
    const key = /API key:\s+(mk-\S+)/.exec(output)![1];
    const databaseUrl = options.databaseUrl ?? `postgres://postgres:postgres@127.0.0.1:${databasePort}/postgres`;
    return new ServerProcess(child, dataDir, `http://127.0.0.1:${port}`, key, databaseUrl, () => output);
  }

  /** A GraphQL call with the workspace key; throws on GraphQL errors. */
  async graphql(query: string, variables: Record<string, unknown> = {}): Promise<any> {
    return graphqlCall(this.baseUrl, this.key, query, variables);
  }

  /** The server's process id (its agents and embedded PostgreSQL are its children). */
  get pid(): number {
    return this.child.pid!;
  }

  /** Ctrl-C (which drains its agents), SIGKILL to it and its children if it has not exited after `timeoutMs`, then the data directory goes. */
  async stop(timeoutMs = 30_000): Promise<void> {
    if (this.child.exitCode === null && this.child.signalCode === null) {
      const exited = new Promise((resolve) => this.child.once('exit', resolve));
      const tree = descendants(this.pid);
      this.child.kill('SIGINT');
      const timer = setTimeout(() => killTree(this.child, tree), timeoutMs);
      await exited;
      clearTimeout(timer);
    }
    fs.rmSync(this.dataDir, { recursive: true, force: true });
  }
}

/** SIGKILL to a server and everything below it (agents, PostgreSQL), now or when `known` was taken. */
function killTree(child: ChildProcess, known: number[] = []): void {
  if (child.pid === undefined) return;
  for (const pid of new Set([...known, ...descendants(child.pid), child.pid])) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // gone already
    }
  }
}

/** Polls `check` (errors count as not yet) until it holds. */
export async function until(check: () => boolean | Promise<boolean>, timeoutMs: number, what: string, intervalMs = 100): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await Promise.resolve(check()).catch(() => false))) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
}
