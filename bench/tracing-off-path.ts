/**
 * `node dist/bench/tracing-off-path.js --base /tmp/base`: what tracing's code costs the request
 * path while tracing is off, measured finer than a whole-server run can on a shared 2-core VM
 * (run-tracing.ts: ±10 % between repetitions). One process runs the pipeline's part of a chat
 * request (admitText → dispatch → a chunk → completed → close: the WorkTicket, its phases, its
 * FinishedRequest) over in-memory fakes, from this checkout's dist/ and from the base's, in
 * alternating rounds, and reports CPU µs per request of each. The gateway's additions while off
 * (one more field on the fast lane's request object, null checks) are not in it: a few
 * nanoseconds, below what this resolves.
 * Flags: --base DIR (a built checkout, as for run-tracing.ts) --requests 200000 --rounds 7
 */
import path from 'node:path';
import { parseArgs } from 'node:util';
import { median } from './report';
import { PROJECT_ROOT } from './targets';

const MODEL = 'acme/chat-8b';
const KEY = { id: 'key_1', workspaceId: 'ws_owner', rpmLimit: 60, tpdLimit: 1_000_000, creditExhausted: false };
const DEPLOYMENT = { id: 'dep_owner', slug: 'owned', workspaceId: 'ws_owner', modelId: MODEL, status: 'Running', sharing: 'not_shared', routingPolicy: 'least-loaded' };
const CHUNK = Buffer.from('data: {"choices":[{"delta":{"content":"hi"}}]}\n\n');
const USAGE = { promptTokens: 12, completionTokens: 30, totalTokens: 42 };

interface Listener { onChunk(data: Buffer): void; onCompleted(usage: unknown, reason: string): void; onFailed(): void; onOutput(): void }

/** A pipeline of `root`'s build over fakes that cost the same in both builds. */
function pipelineOf(root: string) {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const { InferencePipeline } = require(path.join(root, 'dist/control-plane/pipeline/inference-pipeline.js'));
  const hold = { apiKeyId: 'key_1', day: 20_000, tokens: 100, shared: false };
  const decision = { remainingRequests: 59, resetRequestsSeconds: 60, remainingTokens: 900, resetTokensSeconds: 3_600, hold };
  let sent: Listener | null = null;
  const job = { id: 'job_1', replicaId: 'rep_1', carrier: { replicaId: 'rep_1' }, finished: false, canceled: false, cancel() {}, consumed() {} };
  const model = { id: MODEL, modality: 'text', task: 'chat', engine: 'vllm', official: true, inputModalities: ['text'] };
  const pipeline = new InferencePipeline({
    catalog: { find: () => model },
    rateLimiter: { admit: async () => decision, settle() {}, refusalNow: () => null },
    jobs: { dispatch: (_request: unknown, listener: Listener) => { sent = listener; return job; } },
    usage: { record() {} },
    metrics: { recordTokens() {}, recordTimeToFirstToken() {} },
    observer: { requestFinished() {} },
    cacheSalts: { of: () => 'salt' },
  });
  const body = Buffer.from('{"messages":[{"role":"user","content":"hi"}],"max_tokens":50}');
  const work = {
    endpoint: 'chat.completions', body, fields: { max_tokens: 50 }, model: undefined, stream: true, includeUsage: true, deadlineUnixMs: 9e12,
    streamWindowBytes: 65_536, servedBy: () => 'chat', trace: { requestId: 'req_1' },
  };
  const listener: Listener = { onChunk() {}, onCompleted() {}, onFailed() {}, onOutput() {} };
  return async () => {
    const ticket = await pipeline.admitText(KEY, DEPLOYMENT, work);
    ticket.dispatch(listener);
    sent!.onChunk(CHUNK);
    sent!.onCompleted(USAGE, 'stop');
    ticket.close();
  };
}

async function cpuPerRequest(request: () => Promise<void>, requests: number): Promise<number> {
  const before = process.cpuUsage();
  for (let index = 0; index < requests; index++) await request();
  const spent = process.cpuUsage(before);
  return (spent.user + spent.system) / requests;
}

async function main(): Promise<void> {
  const { values } = parseArgs({ options: { base: { type: 'string' }, requests: { type: 'string', default: '200000' }, rounds: { type: 'string', default: '7' } } });
  if (!values.base) throw new Error('--base DIR is required');
  const builds = { base: pipelineOf(path.resolve(values.base)), off: pipelineOf(PROJECT_ROOT) };
  const requests = Number(values.requests);
  for (const request of Object.values(builds)) await cpuPerRequest(request, requests / 4);
  const results: Record<string, number[]> = { base: [], off: [] };
  for (let round = 0; round < Number(values.rounds); round++) {
    for (const name of round % 2 ? ['off', 'base'] : ['base', 'off']) results[name].push(await cpuPerRequest(builds[name as 'base' | 'off'], requests));
  }
  const ratios = results.off.map((value, index) => value / results.base[index]);
  console.log(JSON.stringify({ microsPerRequest: { base: median(results.base), off: median(results.off) }, offOverBase: { median: median(ratios), min: Math.min(...ratios), max: Math.max(...ratios) }, results }, null, 1));
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
