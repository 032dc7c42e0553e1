/**
 * gRPC frames per second over the real worker.v1 stream between two processes: agent →
 * control plane with one chunk event per frame and with 16 per JobEventBatch, and control
 * plane → agent Assigns. Both sides respect backpressure (write() false → wait for 'drain').
 * Child mode: node dist/bench/grpc-frames.js client <address> <mode> <seconds>
 */
import { spawn } from 'node:child_process';
import * as grpc from '@grpc/grpc-js';
import { loadWorkerService, type AgentFrame, type ControlFrame } from '../proto/worker/v1';

type Mode = 'agent-single' | 'agent-batch16' | 'control-assign';
const PAYLOAD = Buffer.alloc(60, 'x');
const CHUNK_EVENT = { jobId: 'job_bench', chunk: { data: PAYLOAD } };
const FRAMES: Record<Exclude<Mode, 'control-assign'>, AgentFrame> = {
  'agent-single': { frame: 'jobEvent', jobEvent: CHUNK_EVENT },
  'agent-batch16': { frame: 'jobEvents', jobEvents: { events: Array.from({ length: 16 }, () => CHUNK_EVENT) } },
};
const ASSIGN: ControlFrame = {
  frame: 'assign',
  assign: { jobId: 'job_bench', kind: 'JOB_KIND_CHAT_COMPLETION', deadlineUnixMs: 0, body: PAYLOAD, stream: false, includeUsage: false, model: 'm' },
};

/** Writes `frame` as fast as the stream takes it until `until`, then resolves with the count. */
async function flood(stream: grpc.ClientDuplexStream<AgentFrame, ControlFrame> | grpc.ServerDuplexStream<AgentFrame, ControlFrame>, frame: unknown, until: number): Promise<number> {
  let written = 0;
  while (Date.now() < until) {
    for (let burst = 0; burst < 64; burst++) {
      written++;
      if (!(stream as grpc.ClientWritableStream<unknown>).write(frame)) {
        await new Promise((resolve) => stream.once('drain', resolve));
        break;
      }
    }
    await new Promise((resolve) => setImmediate(resolve));
  }
  return written;
}

export async function measureGrpcFrames(seconds: number): Promise<Record<string, number>> {
  const service = loadWorkerService();
  const server = new grpc.Server();
  let onResult: (count: number) => void = () => {};
  server.addService(service.service, {
    connect: (stream: grpc.ServerDuplexStream<AgentFrame, ControlFrame>) => {
      let mode: Mode | null = null;
      let received = 0;
      let startedAt = 0;
      stream.on('data', (frame: AgentFrame) => {
        if (!mode) {
          mode = frame.hello!.agentId as Mode;
          startedAt = Date.now();
          if (mode === 'control-assign') void flood(stream, ASSIGN, startedAt + seconds * 1000).then(() => stream.end());
          return;
        }
        received += frame.jobEvents ? frame.jobEvents.events.length : 1;
      });
      stream.on('end', () => {
        if (mode !== 'control-assign') onResult(received / ((Date.now() - startedAt) / 1000));
        stream.end();
      });
      stream.on('error', () => {});
    },
  });
  const port = await new Promise<number>((resolve, reject) => server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (error, bound) => (error ? reject(error) : resolve(bound))));
  const results: Record<string, number> = {};
  const modes: Array<[Mode, string]> = [
    ['agent-single', 'agent→control plane, 1 event/frame (events/s)'],
    ['agent-batch16', 'agent→control plane, 16 events/frame (events/s)'],
    ['control-assign', 'control plane→agent Assigns (frames/s)'],
  ];
  for (const [mode, label] of modes) {
    const serverSide = new Promise<number>((resolve) => (onResult = resolve));
    const child = spawn(process.execPath, [__filename, 'client', `127.0.0.1:${port}`, mode, String(seconds)], { stdio: ['ignore', 'pipe', 'inherit'] });
    let output = '';
    child.stdout!.on('data', (part) => (output += part));
    await new Promise((resolve) => child.on('exit', resolve));
    results[label] = Math.round(mode === 'control-assign' ? Number(output.trim()) : await serverSide);
  }
  server.forceShutdown();
  return results;
}

async function client(address: string, mode: Mode, seconds: number): Promise<void> {
  const service = loadWorkerService();
  const stub = new service(address, grpc.credentials.createInsecure(), { 'grpc.enable_retries': 0 }) as unknown as { connect(): grpc.ClientDuplexStream<AgentFrame, ControlFrame> };
  const stream = stub.connect();
  stream.write({ frame: 'hello', hello: { agentId: mode } as AgentFrame['hello'] });
  if (mode === 'control-assign') {
    let received = 0;
    const startedAt = Date.now();
    stream.on('data', () => received++);
    await new Promise((resolve) => stream.on('end', resolve));
    process.stdout.write(`${received / ((Date.now() - startedAt) / 1000)}\n`);
  } else {
    await flood(stream, FRAMES[mode], Date.now() + seconds * 1000);
    stream.end();
    await new Promise((resolve) => stream.on('end', resolve).on('error', resolve).resume());
  }
  process.exit(0);
}

if (require.main === module && process.argv[2] === 'client') void client(process.argv[3], process.argv[4] as Mode, Number(process.argv[5]));
