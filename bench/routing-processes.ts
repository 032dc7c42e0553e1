/**
 * The routing benchmark's processes: platform servers (`dist/gateway/main.js`, each in its own
 * process group and data directory, as relay.ts starts them) and external worker agents
 * (`dist/worker-agent/main.js` with WORKER_* variables, joining a deployment with its token).
 * Everything started is registered, so a failure or Ctrl-C stops it all: agents first, then
 * the servers in reverse order of start (a second server is a client of the first's database).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { stopServerTree, waitForOutput } from './processes';
import { freePort, PROJECT_ROOT } from './targets';
import { graphqlCall } from './graphql-call';

const stoppers: Array<{ name: string; stop: () => Promise<void> }> = [];
let stopping: Promise<void> | null = null;

/** Stops everything started so far, newest first (once; later calls wait for the same). */
export function stopEverything(): Promise<void> {
  stopping ??= (async () => {
    while (stoppers.length) {
      const { name, stop } = stoppers.pop()!;
      await stop().catch((error) => console.error(`stopping ${name} failed:`, error));
    }
  })().finally(() => { stopping = null; });
  return stopping;
}

/** Registers a clean-up that `stopEverything` runs (newest first); returns a function that runs it now and deregisters it. */
export function onStop(name: string, stop: () => Promise<void>): () => Promise<void> {
  const entry = { name, stop };
  stoppers.push(entry);
  return async () => {
    const index = stoppers.indexOf(entry);
    if (index === -1) return;
    stoppers.splice(index, 1);
    await stop();
  };
}

export class BenchServer {
  private output = '';
  key = '';

  private constructor(readonly name: string, readonly child: ChildProcess, readonly dataDir: string, readonly port: number, readonly grpcPort: number) {
    child.stdout!.on('data', (part) => (this.output += part));
    child.stderr!.on('data', (part) => (this.output += part));
  }

  get baseUrl(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  get grpcAddress(): string {
    return `127.0.0.1:${this.grpcPort}`;
  }

  get pid(): number {
    return this.child.pid!;
  }

  /** Spawns a server on free ports (its gRPC port fixed, so agents and peers can dial it); `stop` is registered at once. */
  static async spawn(name: string, env: Record<string, string>): Promise<{ server: BenchServer; stop: () => Promise<void> }> {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), `bench-routing-${name}-`));
    // The embedded PostgreSQL runs as another user when started as root: it must enter the folder.
    fs.chmodSync(dataDir, 0o755);
    const port = await freePort();
    const grpcPort = await freePort();
    const nodeArgs = (process.env.BENCH_SERVER_NODE_ARGS ?? '').split(' ').filter(Boolean);
    const child = spawn(process.execPath, [...nodeArgs, path.join(PROJECT_ROOT, 'dist/gateway/main.js')], {
      env: {
        PATH: process.env.PATH, DATA_DIR: dataDir, PORT: String(port), HOST: '127.0.0.1', PUBLIC_URL: `http://127.0.0.1:${port}`,
        GRPC_HOST: '127.0.0.1', GRPC_PORT: String(grpcPort), CLUSTER_ADDRESS: `127.0.0.1:${grpcPort}`, LOG_LEVEL: 'warn',
        // Open-loop traces send far more than the default per-key limits.
        DEFAULT_RPM_LIMIT: '1000000000', DEFAULT_TPD_LIMIT: '1000000000000000',
        ...env,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
    });
    const server = new BenchServer(name, child, dataDir, port, grpcPort);
    const stop = onStop(`server ${name}`, async () => {
      await stopServerTree(child, child.pid!);
      fs.rmSync(dataDir, { recursive: true, force: true });
    });
    return { server, stop };
  }

  said(): string {
    return this.output;
  }

  waitFor(pattern: RegExp, timeoutMs: number, what: string): Promise<RegExpExecArray> {
    return waitForOutput(this.child, () => this.output, pattern, timeoutMs, what, `server ${this.name}`);
  }

  /** A GraphQL call with the workspace key (or `token`); throws on GraphQL errors. */
  async graphql(query: string, variables: Record<string, unknown> = {}, token = this.key): Promise<any> {
    return graphqlCall(this.baseUrl, token, query, variables);
  }
}

/**
 * An external worker agent process; its stdin is a pipe it watches (WORKER_EXIT_WITH_PARENT), so
 * it never outlives the benchmark. `stop` is SIGTERM (it drains), SIGKILL after 10 s; the caller
 * registers it (agents stop together, before their servers).
 */
export function spawnAgent(name: string, env: Record<string, string>): { child: ChildProcess; said: () => string; stop: () => Promise<void> } {
  const nodeArgs = (process.env.BENCH_AGENT_NODE_ARGS ?? '').split(' ').filter(Boolean);
  const child = spawn(process.execPath, [...nodeArgs, path.join(PROJECT_ROOT, 'dist/worker-agent/main.js')], {
    env: { PATH: process.env.PATH, WORKER_LOG_LEVEL: 'warn', WORKER_EXIT_WITH_PARENT: 'true', WORKER_AGENT_ID: name, ...env },
    stdio: ['pipe', 'ignore', 'pipe'],
  });
  let output = '';
  child.stderr!.on('data', (part) => {
    output += part;
    if (output.length > 20_000) output = output.slice(-10_000);
  });
  const stop = async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
    await exited;
    clearTimeout(timer);
  };
  return { child, said: () => output, stop };
}

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Polls `check` (errors count as not yet) until it holds. */
export async function until(check: () => boolean | Promise<boolean>, timeoutMs: number, what: string, intervalMs = 200): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await Promise.resolve().then(check).catch(() => false))) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(intervalMs);
  }
}
