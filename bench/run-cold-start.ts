/**
 * `npm run bench:cold-start`: a llama.cpp replica's start-up, phase by phase, on real agent
 * processes (issue 39). Each run spawns `dist/worker-agent/main.js --engine llama-cpp` against a
 * minimal worker.v1 control plane in this process, which welcomes it and records its heartbeats;
 * the phases are the ones the agent itself reports (download, load, warm_up), and the process's
 * own start is timed from the spawn to its Hello. Three kinds of start, interleaved per round:
 * - cold: the GGUF fetched from a local HTTP server into an empty weights cache (--model-url);
 * - warm: the same URL, its file already in the cache (what a second replica on the host gets);
 * - local: --model-path, no cache involved (the load alone).
 * Loopback HTTP is far faster than a Hugging Face download: the cold column measures the fetch
 * path (stream, hash, rename), not a network. Results: bench/results/<date>-cold-start-<sha>.{md,json}.
 * Flags: --sizes 64x2,512x8 (embedding × layers of the generated models) --rounds 3 --threads 1
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import * as grpc from '@grpc/grpc-js';
import { loadWorkerService, PROTOCOL_VERSION, type AgentFrame, type ControlFrame, type StartupPhase } from '../proto/worker/v1';
import { writeTinyGguf } from '../worker-agent/llama/tiny-gguf';
import { describeMachine, sourceState } from './machine';
import { median, saveResults } from './report';
import { PROJECT_ROOT } from './targets';

type Kind = 'cold' | 'warm' | 'local';

interface StartRun {
  readonly size: string;
  readonly kind: Kind;
  readonly round: number;
  /** Spawn to the Hello: the agent process's own start (Node, the bundle, llama.cpp opened). */
  readonly helloMs: number;
  /** Spawn to the first ready heartbeat. */
  readonly readyMs: number;
  readonly phases: Record<string, { durationMs: number; detail: string }>;
}

/** Welcomes every agent and hands each stream's frames to whoever waits for that agent. */
class BenchControlPlane {
  private readonly server = new grpc.Server();
  private readonly waiting = new Map<string, (frame: AgentFrame, at: number) => void>();
  address = '';

  async start(): Promise<void> {
    this.server.addService(loadWorkerService().service, {
      Connect: (call: grpc.ServerDuplexStream<AgentFrame, ControlFrame>) => {
        let agentId = '';
        call.on('data', (frame: AgentFrame) => {
          const at = performance.now();
          if (frame.hello) {
            agentId = frame.hello.agentId;
            call.write({ welcome: { replicaId: `rep_${agentId}`, deploymentId: 'dep_bench', model: 'local/bench', protocolVersion: PROTOCOL_VERSION, heartbeatIntervalMs: 1_000, priorityScheduling: false } });
          }
          this.waiting.get(agentId)?.(frame, at);
        });
        call.on('end', () => call.end());
        call.on('error', () => {});
      },
    });
    const port = await new Promise<number>((resolve, reject) => this.server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (error, bound) => (error ? reject(error) : resolve(bound))));
    this.address = `127.0.0.1:${port}`;
  }

  /** Resolves with the Hello's and the first ready heartbeat's times (performance.now()) and that heartbeat's phases. */
  watch(agentId: string, timeoutMs: number): Promise<{ helloAt: number; readyAt: number; phases: StartupPhase[] }> {
    return new Promise((resolve, reject) => {
      let helloAt = 0;
      const timer = setTimeout(() => reject(new Error(`agent ${agentId} not ready within ${timeoutMs} ms`)), timeoutMs);
      this.waiting.set(agentId, (frame, at) => {
        if (frame.hello) helloAt = at;
        if (frame.heartbeat?.engineHealth === 'ENGINE_HEALTH_HEALTHY') {
          clearTimeout(timer);
          this.waiting.delete(agentId);
          resolve({ helloAt, readyAt: at, phases: frame.heartbeat.startupPhases ?? [] });
        }
      });
    });
  }

  stop(): void {
    this.server.forceShutdown();
  }
}

/** Serves the model files of a directory, as a model store would (no throttling: loopback). */
async function fileServer(directory: string): Promise<{ url: string; close(): Promise<void> }> {
  const server = http.createServer((request, response) => {
    const file = path.join(directory, path.basename(request.url ?? ''));
    fs.stat(file, (error, stat) => {
      if (error) {
        response.writeHead(404).end();
        return;
      }
      response.writeHead(200, { 'content-length': stat.size, 'content-type': 'application/octet-stream' });
      fs.createReadStream(file).pipe(response);
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, close: () => new Promise((resolve) => server.close(() => resolve())) };
}

async function stopAgent(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = once(child, 'exit');
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 5_000);
  await exited;
  clearTimeout(timer);
}

async function main(): Promise<void> {
  const { values } = parseArgs({ options: { sizes: { type: 'string', default: '64x2,512x8' }, rounds: { type: 'string', default: '3' }, threads: { type: 'string', default: '1' } } });
  const rounds = Number(values.rounds);
  const workDir = fs.mkdtempSync(path.join(os.tmpdir(), 'bench-cold-start-'));
  const modelsDir = path.join(workDir, 'models');
  fs.mkdirSync(modelsDir);
  const plane = new BenchControlPlane();
  await plane.start();
  const files = await fileServer(modelsDir);
  const runs: StartRun[] = [];
  const models: Array<{ size: string; bytes: number }> = [];
  let counter = 0;
  const agents = new Set<ChildProcess>();
  const stopAll = () => { for (const agent of agents) agent.kill('SIGKILL'); };
  process.once('SIGINT', () => { stopAll(); process.exit(130); });
  try {
    for (const size of values.sizes.split(',')) {
      const [embedding, layers] = size.split('x').map(Number);
      const file = writeTinyGguf(path.join(modelsDir, `generated-${size}.gguf`), {
        contextLength: 2048, embeddingLength: embedding, layers, heads: Math.max(4, embedding / 64), kvHeads: Math.max(2, embedding / 256),
        feedForwardLength: Math.round((embedding * 8) / 3 / 64) * 64 || 128,
      });
      const bytes = fs.statSync(file).size;
      models.push({ size, bytes });
      const sha256 = createHash('sha256').update(fs.readFileSync(file)).digest('hex');
      const url = `${files.url}/${path.basename(file)}`;
      const warmCache = path.join(workDir, `cache-warm-${size}`);
      const start = async (kind: Kind, round: number): Promise<void> => {
        const agentId = `agt_bench_${++counter}`;
        const coldCache = path.join(workDir, `cache-cold-${counter}`);
        const model = kind === 'local'
          ? { WORKER_LLAMA_MODEL_PATH: file }
          : { WORKER_LLAMA_MODEL_URL: url, WORKER_LLAMA_MODEL_SHA256: sha256, WORKER_MODEL_CACHE_DIR: kind === 'cold' ? coldCache : warmCache };
        const watching = plane.watch(agentId, 300_000);
        const spawnedAt = performance.now();
        const child = spawn(process.execPath, [path.join(PROJECT_ROOT, 'dist/worker-agent/main.js')], {
          env: {
            PATH: process.env.PATH, WORKER_CONTROL_PLANE: plane.address, WORKER_JOIN_TOKEN: 'jt-bench', WORKER_AGENT_ID: agentId, WORKER_ENGINE: 'llama-cpp',
            WORKER_LLAMA_THREADS: values.threads, WORKER_LLAMA_CONTEXT_SIZE: '512', WORKER_LLAMA_PARALLEL: '1', WORKER_LOG_LEVEL: 'warn', ...model,
          },
          stdio: ['ignore', 'ignore', 'inherit'],
        });
        agents.add(child);
        try {
          const seen = await watching;
          runs.push({
            size, kind, round, helloMs: seen.helloAt - spawnedAt, readyMs: seen.readyAt - spawnedAt,
            phases: Object.fromEntries(seen.phases.map((phase) => [phase.name, { durationMs: phase.durationMs, detail: phase.detail }])),
          });
          const last = runs.at(-1)!;
          console.log(`${size} ${kind.padEnd(5)} round ${round}: hello ${last.helloMs.toFixed(0)} ms, ready ${last.readyMs.toFixed(0)} ms; `
            + Object.entries(last.phases).map(([name, phase]) => `${name} ${phase.durationMs} ms (${phase.detail})`).join(', '));
        } finally {
          await stopAgent(child);
          agents.delete(child);
          fs.rmSync(coldCache, { recursive: true, force: true });
        }
      };
      // The warm cache is filled by one unmeasured start, as the first replica on a host fills it.
      await start('warm', 0);
      runs.pop();
      for (let round = 1; round <= rounds; round += 1) {
        const order: Kind[] = round % 2 === 1 ? ['cold', 'warm', 'local'] : ['local', 'warm', 'cold'];
        for (const kind of order) await start(kind, round);
      }
    }
  } finally {
    stopAll();
    plane.stop();
    await files.close();
    fs.rmSync(workDir, { recursive: true, force: true });
  }
  report(runs, models);
}

function report(runs: StartRun[], models: Array<{ size: string; bytes: number }>): void {
  const machine = describeMachine();
  const source = sourceState();
  const ms = (values: number[]) => (values.length === 0 ? '–' : `${median(values).toFixed(0)} (${Math.min(...values).toFixed(0)}–${Math.max(...values).toFixed(0)})`);
  const lines = [
    `# Cold start of a llama.cpp replica, phase by phase (${new Date().toISOString().slice(0, 10)}, ${String(source.commit).slice(0, 7)})`, '',
    `Machine: ${machine.cpu}, ${machine.cores} cores, ${machine.memoryGiB} GiB, Node ${machine.node}. Load average at the end: ${os.loadavg().map((load) => load.toFixed(2)).join(' ')}.`,
    ...(source.changedOutsideBench.length > 0 ? [`Uncommitted changes outside bench/: ${source.changedOutsideBench.join(', ')}.`] : []), '',
    'Milliseconds, median (min–max) of the rounds. `hello`: spawn to the agent\'s Hello (its process start); `download`, `load`, `warm_up`: as the agent timed them and sent them on its ready heartbeat; `ready`: spawn to that heartbeat.', '',
  ];
  for (const { size, bytes } of models) {
    lines.push(`## Generated model ${size} (embedding × layers), ${(bytes / 2 ** 20).toFixed(1)} MiB`, '', '| start | hello | download | load | warm_up | ready | download says |', '|---|---:|---:|---:|---:|---:|---|');
    for (const kind of ['cold', 'warm', 'local'] as Kind[]) {
      const mine = runs.filter((run) => run.size === size && run.kind === kind);
      const phase = (name: string) => mine.flatMap((run) => (run.phases[name] ? [run.phases[name].durationMs] : []));
      lines.push(`| ${kind} | ${ms(mine.map((run) => run.helloMs))} | ${ms(phase('download'))} | ${ms(phase('load'))} | ${ms(phase('warm_up'))} | ${ms(mine.map((run) => run.readyMs))} | ${mine[0]?.phases.download?.detail ?? 'no download phase'} |`);
    }
    lines.push('');
  }
  saveResults(`${new Date().toISOString().slice(0, 10)}-cold-start-${String(source.commit).slice(0, 7)}`, { machine, source, models, runs }, lines.join('\n'));
}

main().then(() => process.exit(0), (error) => {
  console.error(error);
  process.exit(1);
});
