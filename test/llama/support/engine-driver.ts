/**
 * Runs the compiled `LlamaCppEngine` (dist/) in a child Node process and plays a script of
 * requests against it. node-llama-cpp is ESM and jest's CommonJS VM cannot `import()` it, so
 * tests that need the engine itself (not a whole agent) drive it from a plain Node process.
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

const DIST = path.resolve(__dirname, '../../../dist/worker-agent');

export interface DriverEngine {
  readonly modelPath: string;
  readonly threads?: number;
  readonly contextSize?: number;
  readonly parallel?: number;
  readonly prefixCache?: boolean;
  readonly cachedSequences?: number;
}

export interface DriverRequest {
  readonly engine: string;
  readonly kind?: 'JOB_KIND_CHAT_COMPLETION' | 'JOB_KIND_COMPLETION';
  readonly body: Record<string, unknown>;
  readonly includeUsage?: boolean;
}

export interface Signals {
  readonly running: number;
  readonly waiting: number;
  readonly kvCacheUsage: number;
  readonly prefixCacheHitRate: number | null;
}

export interface DriverResult {
  /** The non-streamed body, parsed. */
  readonly body?: any;
  /** The streamed events' JSON payloads, parsed. */
  readonly events: any[];
  readonly ms: number;
  /** The engine's signals when the first chunk was sent (streams only). */
  readonly streamingSignals?: Signals;
  /** The engine's signals once the request finished. */
  readonly signals: Signals;
  /** What the engine reported to the agent (the job's Usage on the wire), when it finished. */
  readonly usage?: { promptTokens: number; completionTokens: number; totalTokens: number; cachedTokens?: number };
  readonly error?: string;
}

const SCRIPT = `
const { LlamaCppEngine } = require(${JSON.stringify(`${DIST}/llama/llama-cpp-engine.js`)});
const { JobCancellation } = require(${JSON.stringify(`${DIST}/job-cancellation.js`)});
const { silentLogger } = require(${JSON.stringify(`${DIST}/agent-logger.js`)});
const readline = require('node:readline');
const engines = {};
let job = 0;
const run = async (request) => {
  const engine = engines[request.engine];
  const events = [];
  let body;
  let streamingSignals;
  const sink = {
    chunk(data) {
      streamingSignals ??= engine.signals();
      for (const event of data.toString().split('\\n\\n')) if (event.startsWith('data: {')) events.push(JSON.parse(event.slice(6)));
    },
    output(data) { body = JSON.parse(data.toString()); },
  };
  const started = process.hrtime.bigint();
  let error;
  let usage;
  try {
    ({ usage } = await engine.run({
      jobId: 'job_' + job++, kind: request.kind ?? 'JOB_KIND_CHAT_COMPLETION', body: Buffer.from(JSON.stringify(request.body)),
      stream: request.body.stream === true, includeUsage: request.includeUsage === true, model: 'local/tiny',
    }, sink, new JobCancellation()));
  } catch (failure) {
    error = failure.message;
  }
  const ms = Number(process.hrtime.bigint() - started) / 1e6;
  // Sequences return to the pool once llama.cpp has finished its last step: let that happen.
  await new Promise((resolve) => setTimeout(resolve, 20));
  return { body, events, ms, streamingSignals, signals: engine.signals(), usage, error };
};
const handle = async (message) => {
  if (message.start) {
    for (const [name, options] of Object.entries(message.start)) {
      const engine = new LlamaCppEngine({ threads: 1, parallel: 2, ...options }, silentLogger);
      await engine.start();
      engines[name] = engine;
    }
    return [];
  }
  if (message.close) {
    for (const engine of Object.values(engines)) await engine.close();
    return [];
  }
  return await Promise.all(message.requests.map(run));
};
let queue = Promise.resolve();
readline.createInterface({ input: process.stdin }).on('line', (line) => {
  const message = JSON.parse(line);
  queue = queue.then(() => handle(message)).then(
    (results) => process.stdout.write(JSON.stringify({ id: message.id, results }) + '\\n'),
    (error) => process.stdout.write(JSON.stringify({ id: message.id, failure: String(error && error.stack || error) }) + '\\n'),
  );
});
`;

export interface EngineDriver {
  /** Sends the requests at once; resolves with their results, in order. */
  run(...requests: DriverRequest[]): Promise<DriverResult[]>;
  /** Closes the engines and ends the process. */
  close(): Promise<void>;
}

/** Starts a Node process with the given engines loaded (named as in `engines`). */
export async function startEngineDriver(engines: Record<string, DriverEngine>): Promise<EngineDriver> {
  if (!fs.existsSync(`${DIST}/llama/llama-cpp-engine.js`)) throw new Error(`${DIST} is missing: run npx tsc -p tsconfig.json first`);
  const child = spawn(process.execPath, ['-e', SCRIPT], { stdio: ['pipe', 'pipe', 'pipe'] });
  let stderr = '';
  let buffered = '';
  let nextId = 0;
  const pending = new Map<number, { resolve: (results: DriverResult[]) => void; reject: (error: Error) => void }>();
  child.stderr.on('data', (data: Buffer) => { stderr += data.toString(); });
  child.stdout.on('data', (data: Buffer) => {
    buffered += data.toString();
    let end: number;
    while ((end = buffered.indexOf('\n')) !== -1) {
      const reply = JSON.parse(buffered.slice(0, end));
      buffered = buffered.slice(end + 1);
      const waiter = pending.get(reply.id);
      pending.delete(reply.id);
      if (reply.failure) waiter?.reject(new Error(reply.failure));
      else waiter?.resolve(reply.results);
    }
  });
  const exited = new Promise<void>((resolve) => child.on('exit', (code) => {
    for (const waiter of pending.values()) waiter.reject(new Error(`engine driver exited with ${code}: ${stderr}`));
    pending.clear();
    resolve();
  }));
  const send = (message: Record<string, unknown>) => new Promise<DriverResult[]>((resolve, reject) => {
    const id = nextId++;
    pending.set(id, { resolve, reject });
    child.stdin.write(`${JSON.stringify({ id, ...message })}\n`);
  });
  await send({ start: engines });
  return {
    run: (...requests) => send({ requests }),
    close: async () => {
      if (child.exitCode === null) {
        await send({ close: true }).catch(() => undefined);
        child.stdin.end();
      }
      const killer = setTimeout(() => child.kill('SIGKILL'), 5_000);
      await exited;
      clearTimeout(killer);
    },
  };
}
