/**
 * A real server started the way `npm start` starts it (`node dist/gateway/launch.js`, which runs
 * `dist/gateway/main.js` as its child), on free ports of 127.0.0.1 and a test database. Fault
 * tests kill it from outside; `dispose()` then stops whatever of its process tree is left.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { freePort } from '../../../control-plane/database/embedded-database';
import { childrenOf, commandLineOf, isRunning, killQuietly, within } from './processes';

const LAUNCHER = path.resolve(__dirname, '../../../dist/gateway/launch.js');
export const AGENT_ENTRY_MATCH = 'dist/worker-agent/main.js';

export interface ServerProcessOptions {
  /** The test database; undefined: the server starts its embedded PostgreSQL in its DATA_DIR. */
  readonly databaseUrl: string | undefined;
  /** A DATA_DIR of the test's (kept on dispose: the test removes it); otherwise a fresh one, removed on dispose. */
  readonly dataDir?: string;
  /** Reuse a gRPC port (a server restarted in place); otherwise a free one. */
  readonly grpcPort?: number;
  /** Server variables over the defaults below. */
  readonly env?: Record<string, string>;
  /** How long the server may take to answer /healthz (and print the banner on a first run). */
  readonly readyTimeoutMs?: number;
}

export class ServerProcess {
  /**
   * Every process of this server's tree seen so far, with its command line: `dispose()` kills
   * those still running under the same command line (a pid freed by a dead agent may belong to
   * someone else's process by then).
   */
  private readonly seen = new Map<number, string>();

  private constructor(
    private readonly launcher: ChildProcess,
    private readonly dataDir: string,
    private readonly ownsDataDir: boolean,
    readonly url: string,
    readonly grpcPort: number,
    /** The server process proper (`main.js`), the launcher's child. */
    readonly pid: number,
    /** The workspace API key a first run printed (undefined on a later start). */
    readonly apiKey: string | undefined,
    readonly output: () => string,
  ) {
    this.remember(pid);
  }

  static async start(options: ServerProcessOptions): Promise<ServerProcess> {
    const dataDir = options.dataDir ?? freshDataDir();
    const port = await freePort();
    const grpcPort = options.grpcPort ?? await freePort();
    const launcher = spawn(process.execPath, [LAUNCHER], {
      env: {
        PATH: process.env.PATH, DATA_DIR: dataDir, ...(options.databaseUrl ? { DATABASE_URL: options.databaseUrl } : {}),
        HOST: '127.0.0.1', PORT: String(port), GRPC_HOST: '127.0.0.1', GRPC_PORT: String(grpcPort), LOG_LEVEL: 'warn',
        ...options.env,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    launcher.stdout!.on('data', (part) => (output += part));
    launcher.stderr!.on('data', (part) => (output += part));
    const url = `http://127.0.0.1:${port}`;
    const exited = () => launcher.exitCode !== null || launcher.signalCode !== null;
    let pid: number | undefined;
    try {
      const timeoutMs = options.readyTimeoutMs ?? 60_000;
      await within(async () => exited() || (await fetch(`${url}/healthz`)).status === 200, timeoutMs, 'the server to answer /healthz', 100);
      // A first run prints the banner with the key after it started listening.
      await within(() => exited() || /API key:\s+mk-|Deployments:/.test(output), timeoutMs, 'the server banner', 50);
      if (exited()) throw new Error(`server exited at start: ${output}`);
      [pid] = childrenOf(launcher.pid!, 'dist/gateway/main.js');
      if (pid === undefined) throw new Error('the launcher has no server child');
    } catch (error) {
      if (!exited()) killTree(launcher.pid!);
      if (!options.dataDir) fs.rmSync(dataDir, { recursive: true, force: true });
      throw error;
    }
    const apiKey = /API key:\s+(mk-\S+)/.exec(output)?.[1];
    return new ServerProcess(launcher, dataDir, !options.dataDir, url, grpcPort, pid, apiKey, () => output);
  }

  /** The worker agents this server spawned that still run (also remembered for `dispose`). */
  agentPids(): number[] {
    const pids = childrenOf(this.pid, AGENT_ENTRY_MATCH);
    for (const pid of pids) this.remember(pid);
    return pids;
  }

  /** A GraphQL call with the first run's key; throws on GraphQL errors. */
  async graphql(query: string, variables: Record<string, unknown> = {}): Promise<any> {
    const response = await fetch(`${this.url}/graphql`, {
      method: 'POST', headers: { authorization: `Bearer ${this.apiKey}`, 'content-type': 'application/json' }, body: JSON.stringify({ query, variables }),
    });
    const body = (await response.json()) as { data?: unknown; errors?: unknown };
    if (body.errors) throw new Error(JSON.stringify(body.errors));
    return body.data;
  }

  /** kill -9 of the server process (not the launcher, which exits when its child does). */
  kill9(): void {
    killQuietly(this.pid);
  }

  /** kill -9 of the launcher (`npm start`'s own process), leaving the server to notice. */
  kill9Launcher(): void {
    killQuietly(this.launcher.pid!);
  }

  /** A signal to the launcher, as a supervisor or Ctrl-C sends it (the launcher forwards it to the server); resolves with its exit code. */
  async signal(signal: NodeJS.Signals, timeoutMs: number): Promise<number | null> {
    const exited = this.launcher.exitCode !== null || this.launcher.signalCode !== null
      ? Promise.resolve()
      : new Promise((resolve) => this.launcher.once('exit', resolve));
    this.launcher.kill(signal);
    await within(() => this.launcher.exitCode !== null || this.launcher.signalCode !== null, timeoutMs, `the server to exit after ${signal}`, 20);
    await exited;
    return this.launcher.exitCode;
  }

  /** SIGKILLs everything of the tree still running (launcher, server, agents, seen or not) and removes the data directory. */
  async dispose(): Promise<void> {
    const launcherExited = new Promise((resolve) => (this.launcherRunning() ? this.launcher.once('exit', resolve) : resolve(undefined)));
    if (this.launcherRunning()) killTree(this.launcher.pid!);
    for (const [pid, commandLine] of this.seen) {
      if (!isRunning(pid) || commandLineOf(pid) !== commandLine) continue;
      killTree(pid);
    }
    await launcherExited;
    if (this.ownsDataDir) fs.rmSync(this.dataDir, { recursive: true, force: true });
  }

  /** Calls `listener` with the launcher's exit code (the server's) when it exits. */
  onExit(listener: (code: number | null) => void): void {
    if (!this.launcherRunning()) listener(this.launcher.exitCode);
    else this.launcher.once('exit', (code) => listener(code));
  }

  /** Whether the launcher (and so the server) still runs. */
  get running(): boolean {
    return this.launcherRunning();
  }

  private launcherRunning(): boolean {
    return this.launcher.exitCode === null && this.launcher.signalCode === null;
  }

  private remember(pid: number): void {
    this.seen.set(pid, commandLineOf(pid));
  }
}

/**
 * A fresh DATA_DIR. Readable by others (mkdtemp makes it 0700): run as root, the embedded
 * PostgreSQL drops to the `postgres` user, which must reach its folder inside.
 */
export function freshDataDir(): string {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'fault-server-'));
  fs.chmodSync(dataDir, 0o755);
  return dataDir;
}

/** SIGKILL of a process and, first, of its descendants (an agent's children would outlive it otherwise). */
export function killTree(pid: number): void {
  for (const child of childrenOf(pid)) killTree(child);
  killQuietly(pid);
}
