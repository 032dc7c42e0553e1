/**
 * `npm run bench:agent`: the single binary (`dist/bin/worker-agent-linux-<arch>`) against the
 * agent from a clone (`node dist/worker-agent/main.js`, what `npm run worker-agent` runs; the npm
 * wrapper's own start is measured apart), on this machine:
 * - size: the binary; the npm package (packed and installed with sharp); a clone's node_modules;
 * - cold start: process spawn → its Hello received by a control plane (a minimal gRPC server
 *   here that welcomes it), median and max of `--starts` runs each, interleaved;
 * - RSS (/proc/<pid>/status VmRSS) 3 s after the Welcome (idle), and the peak while it carries 64
 *   concurrent streams (CPU engine, 20 tokens/s, 200 tokens: ~10 s each).
 * Flags: --starts 10 --streams 64
 */
import { spawn, execFileSync, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import * as grpc from '@grpc/grpc-js';
import { loadWorkerService, PROTOCOL_VERSION, type AgentFrame, type ControlFrame } from '../proto/worker/v1';
import { describeMachine } from './machine';
import { median, saveResults } from './report';
import { PROJECT_ROOT } from './targets';

const BINARY = path.join(PROJECT_ROOT, 'dist', 'bin', `worker-agent-linux-${process.arch}`);
const CLONE_ENTRY = path.join(PROJECT_ROOT, 'dist', 'worker-agent', 'main.js');
const PACKAGE_DIR = path.join(PROJECT_ROOT, 'dist', 'agent-package');

interface Variant { name: string; command: string; args: string[] }

const VARIANTS: Variant[] = [
  { name: 'single binary', command: BINARY, args: [] },
  { name: 'node dist/worker-agent/main.js', command: process.execPath, args: [CLONE_ENTRY] },
  { name: 'npm run worker-agent', command: 'npm', args: ['run', '--silent', 'worker-agent'] },
];

/** A control plane that welcomes every agent and notes when each Hello arrived. */
class HelloClock {
  private readonly waiting = new Map<string, (at: number) => void>();
  readonly streams = new Map<string, grpc.ServerDuplexStream<AgentFrame, ControlFrame>>();
  readonly inFlight = new Map<string, number>();

  private constructor(private readonly server: grpc.Server, readonly address: string) {}

  static async start(): Promise<HelloClock> {
    const server = new grpc.Server();
    let clock: HelloClock | undefined;
    server.addService(loadWorkerService().service, {
      Connect: (call: grpc.ServerDuplexStream<AgentFrame, ControlFrame>) => {
        let agentId = '';
        call.on('data', (frame: AgentFrame) => {
          if (frame.hello) {
            const at = performance.now();
            agentId = frame.hello.agentId;
            clock!.streams.set(agentId, call);
            call.write({ welcome: { protocolVersion: PROTOCOL_VERSION, replicaId: 'rep_bench', deploymentId: 'dep_bench', model: 'bench', heartbeatIntervalMs: 500 } } as ControlFrame);
            clock!.waiting.get(agentId)?.(at);
          } else if (frame.heartbeat) {
            clock!.inFlight.set(agentId, frame.heartbeat.inFlight);
          }
        });
        call.on('error', () => {});
      },
    });
    const port = await new Promise<number>((resolve, reject) => server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (error, bound) => (error ? reject(error) : resolve(bound))));
    clock = new HelloClock(server, `127.0.0.1:${port}`);
    return clock;
  }

  hello(agentId: string): Promise<number> {
    return new Promise((resolve) => this.waiting.set(agentId, resolve));
  }

  close(): void {
    this.server.forceShutdown();
  }
}

async function main(): Promise<void> {
  const { values } = parseArgs({ options: { starts: { type: 'string', default: '10' }, streams: { type: 'string', default: '64' } } });
  if (!fs.existsSync(BINARY)) throw new Error(`${BINARY} is missing: run npm run build:agent first`);
  const clock = await HelloClock.start();
  try {
    const starts = Number(values.starts);
    const coldStarts = new Map<string, number[]>(VARIANTS.map((variant) => [variant.name, []]));
    for (let round = 0; round < starts; round++) {
      for (const variant of round % 2 === 0 ? VARIANTS : [...VARIANTS].reverse()) {
        coldStarts.get(variant.name)!.push(await coldStart(clock, variant, `agt_cold_${round}_${variant.name.length}`));
      }
    }
    const memory = [];
    for (const variant of VARIANTS.slice(0, 2)) memory.push({ variant: variant.name, ...await residentMemory(clock, variant, Number(values.streams)) });
    write({
      machine: describeMachine(), sizes: sizes(),
      coldStartMs: VARIANTS.map((variant) => ({ variant: variant.name, medianMs: round1(median(coldStarts.get(variant.name)!)), maxMs: round1(Math.max(...coldStarts.get(variant.name)!)), runs: starts })),
      memory, streams: Number(values.streams),
    });
  } finally {
    clock.close();
  }
}

function agentEnv(clock: HelloClock, agentId: string): NodeJS.ProcessEnv {
  return {
    PATH: process.env.PATH, HOME: process.env.HOME, WORKER_CONTROL_PLANE: clock.address, WORKER_JOIN_TOKEN: 'jt_bench', WORKER_AGENT_ID: agentId,
    WORKER_LOG_LEVEL: 'warn', WORKER_CPU_TOKENS_PER_SECOND: '20', WORKER_DRAIN_TIMEOUT_MS: '1000',
  };
}

async function coldStart(clock: HelloClock, variant: Variant, agentId: string): Promise<number> {
  const hello = clock.hello(agentId);
  const spawnedAt = performance.now();
  const child = spawn(variant.command, variant.args, { cwd: PROJECT_ROOT, env: agentEnv(clock, agentId), stdio: 'ignore', detached: true });
  const at = await hello;
  await stop(child);
  return at - spawnedAt;
}

async function residentMemory(clock: HelloClock, variant: Variant, streams: number): Promise<{ idleRssMiB: number; peakRssMiB: number; streamsSeen: number }> {
  const agentId = `agt_rss_${variant.name.length}`;
  const hello = clock.hello(agentId);
  const child = spawn(variant.command, variant.args, { cwd: PROJECT_ROOT, env: agentEnv(clock, agentId), stdio: 'ignore', detached: true });
  try {
    await hello;
    await sleep(3_000);
    const idleRssMiB = rssMiB(child.pid!);
    const stream = clock.streams.get(agentId)!;
    for (let index = 0; index < streams; index++) {
      stream.write({
        assign: {
          jobId: `job_${index}`, kind: 'JOB_KIND_CHAT_COMPLETION', deadlineUnixMs: Date.now() + 60_000, stream: true, includeUsage: true, model: 'bench',
          body: Buffer.from(JSON.stringify({ messages: [{ role: 'user', content: `stream ${index}` }], max_tokens: 200, stream: true })),
        },
      } as ControlFrame);
    }
    let peakRssMiB = idleRssMiB;
    let streamsSeen = 0;
    const until = Date.now() + 8_000;
    while (Date.now() < until) {
      await sleep(100);
      peakRssMiB = Math.max(peakRssMiB, rssMiB(child.pid!));
      streamsSeen = Math.max(streamsSeen, clock.inFlight.get(agentId) ?? 0);
    }
    return { idleRssMiB: round1(idleRssMiB), peakRssMiB: round1(peakRssMiB), streamsSeen };
  } finally {
    await stop(child);
  }
}

function rssMiB(pid: number): number {
  const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  return Number(/VmRSS:\s+(\d+) kB/.exec(status)![1]) / 1024;
}

/** Kills the agent's whole process group (npm runs it under a shell) and waits for it. */
async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  try {
    process.kill(-child.pid!, 'SIGKILL');
  } catch {
    child.kill('SIGKILL');
  }
  await exited;
}

function sizes(): Record<string, number> {
  const packed = JSON.parse(execFileSync('npm', ['pack', '--dry-run', '--json', '--ignore-scripts'], { cwd: PACKAGE_DIR, env: { ...process.env, npm_config_loglevel: 'silent' } }).toString())[0];
  const sharpTree = ['sharp', '@img', 'detect-libc', 'semver'].reduce((sum, name) => sum + directoryBytes(path.join(PROJECT_ROOT, 'node_modules', name)), 0);
  return {
    binaryMiB: round1(fs.statSync(BINARY).size / 2 ** 20),
    nodeExecutableMiB: round1(fs.statSync(process.execPath).size / 2 ** 20),
    packageTarballKiB: round1(packed.size / 1024),
    packageUnpackedKiB: round1(packed.unpackedSize / 1024),
    packageInstalledWithSharpMiB: round1((packed.unpackedSize + sharpTree) / 2 ** 20),
    cloneNodeModulesMiB: round1(directoryBytes(path.join(PROJECT_ROOT, 'node_modules')) / 2 ** 20),
  };
}

function directoryBytes(directory: string): number {
  let total = 0;
  for (const entry of fs.readdirSync(directory, { withFileTypes: true })) {
    const full = path.join(directory, entry.name);
    if (entry.isDirectory()) total += directoryBytes(full);
    else if (entry.isFile()) total += fs.statSync(full).size;
  }
  return total;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const round1 = (value: number) => Math.round(value * 10) / 10;

function write(results: { machine: Record<string, string | number>; sizes: Record<string, number>; coldStartMs: Array<{ variant: string; medianMs: number; maxMs: number; runs: number }>; memory: Array<{ variant: string; idleRssMiB: number; peakRssMiB: number; streamsSeen: number }>; streams: number }): void {
  const name = `agent-binary-${new Date().toISOString().slice(0, 10)}-${results.machine.gitSha}`;
  const { sizes: size } = results;
  const markdown = [
    `# Worker agent: single binary vs a clone (${name})`,
    '',
    `Machine: ${results.machine.cpu ?? ''} ${results.machine.cores ?? ''} cores, ${os.platform()} ${os.arch()}; Node ${process.version}.`,
    '',
    '| what | size |',
    '|---|---:|',
    `| single binary (\`dist/bin/worker-agent-linux-${process.arch}\`) | ${size.binaryMiB} MiB (Node's own executable: ${size.nodeExecutableMiB} MiB) |`,
    `| npm package, packed / unpacked | ${size.packageTarballKiB} KiB / ${size.packageUnpackedKiB} KiB |`,
    `| npm package installed with its dependency (sharp) | ${size.packageInstalledWithSharpMiB} MiB |`,
    `| a clone's node_modules (what \`npm run worker-agent\` needs, plus the build) | ${size.cloneNodeModulesMiB} MiB |`,
    '',
    '| variant | cold start to Hello received, median / max ms |',
    '|---|---:|',
    ...results.coldStartMs.map((row) => `| ${row.variant} | ${row.medianMs} / ${row.maxMs} (${row.runs} runs) |`),
    '',
    `| variant | RSS idle (3 s after Welcome) | RSS peak, ${results.streams} concurrent streams | streams in flight seen |`,
    '|---|---:|---:|---:|',
    ...results.memory.map((row) => `| ${row.variant} | ${row.idleRssMiB} MiB | ${row.peakRssMiB} MiB | ${row.streamsSeen} |`),
    '',
  ].join('\n');
  saveResults(name, results, markdown);
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
