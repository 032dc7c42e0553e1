/** The things measured: the upstream alone, nginx and a bare Koa proxy in front of it, and our whole path. */
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { commandOf, descendants, hasCommand, killGroup, pin, spawnPinned } from './processes';

/**
 * `A` and `B→A` are the relay part's two paths (relay.ts): client → server A, client → server B → A.
 * `base`, `off`, `on` and `on 10%` are the tracing benchmark's (run-tracing.ts): another commit's server, ours with tracing off, ours
 * exporting every span, ours sampling one trace in ten.
 */
export type TargetName = 'direct' | 'nginx' | 'koa' | 'floor' | 'ours' | 'root' | 'A' | 'B→A' | 'base' | 'off' | 'on' | 'on json' | 'on 10%';

export interface Target {
  readonly name: TargetName;
  /** Full URL of the chat completions endpoint. */
  readonly url: string;
  readonly key: string;
  /** Processes whose CPU and memory are reported, by role. */
  processes(): Record<string, number[]>;
  stop(): Promise<void>;
}

export const PROJECT_ROOT = path.resolve(__dirname, '../..');

export async function freePort(): Promise<number> {
  return await new Promise((resolve) => {
    const server = net.createServer().listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

async function waitUntil(check: () => Promise<boolean>, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check().catch(() => false))) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

async function answers(url: string, key: string): Promise<boolean> {
  const response = await fetch(url, {
    method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
    body: JSON.stringify({ messages: [{ role: 'user', content: 'ready?' }] }),
  });
  await response.arrayBuffer();
  return response.status === 200;
}

async function stopChild(child: ChildProcess, signal: NodeJS.Signals = 'SIGTERM', timeoutMs = 15_000): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill(signal);
  const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
  await exited;
  clearTimeout(timer);
}

/** The upstream in its own process, so its CPU can be read and it can be pinned. */
export async function startUpstreamProcess(cpus: string | null): Promise<{ url: string; pid: number; stop(): Promise<void> }> {
  const port = await freePort();
  const child = spawnPinned(cpus, process.execPath, [path.join(__dirname, 'upstream.js'), '--port', String(port)], { stdio: 'ignore' });
  const url = `http://127.0.0.1:${port}`;
  await waitUntil(() => answers(`${url}/v1/chat/completions`, ''), 10_000, 'the upstream');
  const pid = cpus ? descendants(child.pid!)[0] ?? child.pid! : child.pid!;
  return { url, pid, stop: () => stopChild(child) };
}

export function directTarget(upstream: { url: string; pid: number }): Target {
  return {
    name: 'direct', url: `${upstream.url}/v1/chat/completions`, key: 'none',
    processes: () => ({ upstream: [upstream.pid] }),
    stop: async () => {},
  };
}

/** nginx, 1 worker, keepalive to the upstream, no buffering; null when nginx is not installed. */
export async function nginxTarget(upstream: { url: string; pid: number }, cpus: string | null): Promise<Target | null> {
  if (!hasCommand('nginx') && !fs.existsSync('/usr/sbin/nginx')) return null;
  const binary = hasCommand('nginx') ? 'nginx' : '/usr/sbin/nginx';
  const prefix = fs.mkdtempSync(path.join(os.tmpdir(), 'bench-nginx-'));
  const port = await freePort();
  fs.writeFileSync(path.join(prefix, 'nginx.conf'), `
worker_processes 1;
pid ${prefix}/nginx.pid;
error_log ${prefix}/error.log warn;
events { worker_connections 8192; }
http {
  access_log off;
  client_body_temp_path ${prefix}/body;
  proxy_temp_path ${prefix}/proxy;
  upstream engine { server ${new URL(upstream.url).host}; keepalive 256; }
  server {
    listen 127.0.0.1:${port};
    location / {
      proxy_pass http://engine;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_buffering off;
    }
  }
}
`);
  const child = spawnPinned(cpus, binary, ['-p', prefix, '-c', path.join(prefix, 'nginx.conf'), '-g', 'daemon off;'], { stdio: 'ignore' });
  const url = `http://127.0.0.1:${port}/v1/chat/completions`;
  await waitUntil(() => answers(url, ''), 10_000, 'nginx');
  const master = cpus ? descendants(child.pid!).find((pid) => commandOf(pid).includes('nginx: master')) ?? child.pid! : child.pid!;
  return {
    name: 'nginx', url, key: 'none',
    processes: () => ({ nginx: [master, ...descendants(master)], upstream: [upstream.pid] }),
    stop: async () => {
      await stopChild(child, 'SIGQUIT');
      fs.rmSync(prefix, { recursive: true, force: true });
    },
  };
}

/** A bare Koa 3 + undici pass-through (bench/koa-proxy.ts): the Node floor our path is compared with. */
export async function koaTarget(upstream: { url: string; pid: number }, cpus: string | null): Promise<Target> {
  const port = await freePort();
  const child = spawnPinned(cpus, process.execPath, [path.join(__dirname, 'koa-proxy.js'), '--port', String(port), '--upstream', upstream.url], { stdio: 'ignore' });
  const url = `http://127.0.0.1:${port}/v1/chat/completions`;
  await waitUntil(() => answers(url, ''), 10_000, 'the Koa proxy');
  const pid = cpus ? descendants(child.pid!)[0] ?? child.pid! : child.pid!;
  return {
    name: 'koa', url, key: 'none',
    processes: () => ({ koa: [pid], upstream: [upstream.pid] }),
    stop: () => stopChild(child),
  };
}

/**
 * Our transport with none of our code (bench/grpc-floor.ts): an HTTP server and an agent on a
 * `worker.v1` gRPC stream, forwarding to the upstream. What two processes and gRPC cost.
 */
export async function floorTarget(upstream: { url: string; pid: number }, cpus: string | null): Promise<Target> {
  const port = await freePort();
  const grpcPort = await freePort();
  const script = path.join(__dirname, 'grpc-floor.js');
  // BENCH_SERVER_NODE_ARGS / BENCH_AGENT_NODE_ARGS profile the two processes as they do ours (e.g. --cpu-prof).
  const nodeArgs = (name: string) => (process.env[name] ?? '').split(' ').filter(Boolean);
  const gateway = spawnPinned(cpus, process.execPath, [...nodeArgs('BENCH_SERVER_NODE_ARGS'), script, 'gateway', '--port', String(port), '--grpc-port', String(grpcPort)], { stdio: 'ignore' });
  await waitUntil(async () => await new Promise<boolean>((resolve) => {
    const socket = net.connect(grpcPort, '127.0.0.1', () => resolve(socket.end() !== undefined)).on('error', () => resolve(false));
  }), 10_000, 'the floor gateway');
  const agent = spawnPinned(cpus, process.execPath, [...nodeArgs('BENCH_AGENT_NODE_ARGS'), script, 'agent', '--grpc-port', String(grpcPort), '--upstream', upstream.url], { stdio: 'ignore' });
  const url = `http://127.0.0.1:${port}/v1/chat/completions`;
  await waitUntil(() => answers(url, ''), 10_000, 'the floor path');
  const pidOf = (child: ChildProcess) => (cpus ? descendants(child.pid!)[0] ?? child.pid! : child.pid!);
  return {
    name: 'floor', url, key: 'none',
    processes: () => ({ gateway: [pidOf(gateway)], agent: [pidOf(agent)], upstream: [upstream.pid] }),
    stop: async () => {
      await stopChild(agent);
      await stopChild(gateway);
    },
  };
}

/** Another build of the server, or ours with other settings (the tracing benchmark). */
export interface OursOptions {
  /** The checkout whose `dist/` runs: another commit's worktree, built (`npx tsc` and the agent build). @default this one */
  readonly root?: string;
  /** Server variables over the benchmark's (its local agent gets the OTEL_* ones too). */
  readonly env?: Record<string, string>;
  /** @default 'ours' */
  readonly name?: TargetName;
}

/**
 * The real server (`dist/gateway/main.js`) on a fresh embedded database, with one local agent
 * whose `openai` engine is the upstream: client → gateway → gRPC → agent → upstream. `onStart`
 * gets its stop as soon as it is spawned (a failed start or Ctrl-C still stops it).
 */
export async function oursTarget(
  upstream: { url: string; pid: number }, cpus: string | null, onStart?: (stop: () => Promise<void>) => void, options: OursOptions = {},
): Promise<Target> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'bench-ours-'));
  // As root, embedded PostgreSQL runs initdb as a `postgres` user, which must enter the folder.
  fs.chmodSync(dataDir, 0o755);
  const port = await freePort();
  // BENCH_SERVER_NODE_ARGS / BENCH_AGENT_NODE_ARGS (e.g. "--cpu-prof --cpu-prof-dir=/tmp/prof/server") profile the server and its agent.
  const serverNodeArgs = (process.env.BENCH_SERVER_NODE_ARGS ?? '').split(' ').filter(Boolean);
  const child = spawn(process.execPath, [...serverNodeArgs, path.join(options.root ?? PROJECT_ROOT, 'dist/gateway/main.js')], {
    env: {
      // BENCH_SERVER_LOG_LEVEL=info measures the server with its one line per request (the default outside benches).
      PATH: process.env.PATH, DATA_DIR: dataDir, PORT: String(port), HOST: '127.0.0.1', GRPC_PORT: '0', GRPC_HOST: '127.0.0.1', LOG_LEVEL: process.env.BENCH_SERVER_LOG_LEVEL ?? 'warn',
      LOCAL_ENGINE: 'openai', LOCAL_ENGINE_URL: upstream.url, LOCAL_AGENT_MAX_CONCURRENCY: '1024',
      DEFAULT_RPM_LIMIT: '1000000000', DEFAULT_TPD_LIMIT: '1000000000000000', LOCAL_AGENT_NODE_ARGS: process.env.BENCH_AGENT_NODE_ARGS ?? '',
      ...options.env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  let banner = '';
  // Kept until the server answers; after that its log lines are read and dropped (a run at info writes one per request).
  let keep = true;
  child.stdout!.on('data', (part) => keep && (banner += part));
  child.stderr!.on('data', (part) => keep && (banner += part));
  const pid = child.pid!;
  // Once: a Ctrl-C during the run and the `finally` after it both call it, and a second SIGINT would make the server exit without draining.
  let stopping: Promise<void> | null = null;
  const stop = () => (stopping ??= (async () => {
    await stopChild(child, 'SIGINT', 30_000);
    killGroup(pid); // whatever outlived it (agents, PostgreSQL)
    fs.rmSync(dataDir, { recursive: true, force: true });
  })());
  onStart?.(stop);
  let key: string;
  let url: string;
  try {
    await waitUntil(async () => /API key:\s+mk-/.test(banner) && /Base URL:\s+http/.test(banner), 60_000, 'the server banner').catch((error) => {
      throw new Error(`${(error as Error).message}; server said: ${banner.slice(-2000)}`);
    });
    key = /API key:\s+(mk-\S+)/.exec(banner)![1];
    url = `${/Base URL:\s+(\S+)/.exec(banner)![1]}/chat/completions`;
    await waitUntil(() => answers(url, key), 60_000, 'the first 200 through our path');
    keep = false;
  } catch (error) {
    await stop();
    throw error;
  }
  const roles = () => {
    const below = descendants(pid);
    return {
      gateway: [pid],
      agent: below.filter((candidate) => commandOf(candidate).includes('worker-agent/main.js')),
      postgres: below.filter((candidate) => commandOf(candidate).includes('postgres')),
    };
  };
  const all = roles();
  pin([pid, ...all.agent, ...all.postgres], cpus);
  return {
    name: options.name ?? 'ours', url, key,
    processes: () => {
      const current = roles();
      pin(current.postgres, cpus);
      return { ...current, upstream: [upstream.pid] };
    },
    stop,
  };
}

/**
 * The same server as `ours`, called on the workspace base URL (`/v1/chat/completions`, the
 * deployment picked by the body's `model`, which the benchmark body sets to the default
 * deployment's catalog model) instead of `/d/<slug>/v1`: measured interleaved with `ours`, on
 * one process, what routing by `model` adds. Stopping either stops the server (once).
 */
export function workspaceRootTarget(ours: Target): Target {
  return { ...ours, name: 'root', url: ours.url.replace(/\/d\/[^/]+\/v1\//, '/v1/') };
}
