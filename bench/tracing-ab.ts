/**
 * `node dist/bench/tracing-ab.js DIR_A DIR_B`: what tracing one request costs the server in two
 * builds (two checkouts, each built: `npx tsc -p tsconfig.json`), measured in one process with
 * the builds interleaved, 2,000 requests at a time, so both meet the same machine speed. On the
 * shared 2-core VM a CPU loop's speed drifts by up to 1.7× from one second to the next, more
 * than a change to the span code moves whole-server runs (run-tracing.ts) or separate processes
 * (tracing-on-path.ts).
 *
 * Each request does what a traced chat request does to spans on the server: its HTTP span
 * (startRequestSpan, the answer's traceparent, endRequestSpan) and, inside Tracing.runIn, the
 * pipeline's RequestSpans (admit; the GenAI span and `place`, the Assign's traceparent; usage,
 * finish reason and replica at settlement), every span encoded by OtlpSpanProcessor into OTLP
 * protobuf and handed to a sender that only counts the bytes (no HTTP: that part is the same in
 * both builds). Reported: µs per request of each build (wall time, the first 5 rounds not
 * counted), and B − A per round (median). Flags: --rounds 60.
 */
import path from 'node:path';
import { parseArgs } from 'node:util';
import { median } from './report';

interface Build {
  readonly root: string;
  one(index: number): void;
  flush(): Promise<void>;
  dropped(): number;
}

/** The span code of the build in `root`, driven as the server drives it (its modules' own instances). */
function build(root: string): Build {
  const load = (file: string) => require(path.join(root, 'dist', file));
  const { Tracing } = load('common/tracing/tracing');
  const { OtlpSpanProcessor } = load('common/tracing/otlp-span-processor');
  const { startRequestSpan, endRequestSpan, workTraceOf, traceparentHeader } = load('gateway/http/request-span');
  const { RequestSpans, GPU_HOURS } = load('control-plane/pipeline/request-spans');
  const sender = { send: async (_body: Buffer) => true, close() {} };
  const processor = new OtlpSpanProcessor(sender, { scheduleDelayMs: 5_000, maxQueueSize: 65_536, maxExportBatchSize: 512 });
  const settings = { sampler: { kind: 'always_on', parentBased: true, ratio: 1 }, resourceAttributes: {}, serviceName: 'inference-platform' };
  const tracing = Tracing.start(settings, 'inference-gateway', { 'service.version': '0.1.0' }, processor);
  const owner = {
    workspaceId: 'ws_0123456789abcdef01234567', deploymentId: 'dep_0123456789abcdef01234567', sharedModel: null,
    model: 'meta-llama/Llama-3.1-8B-Instruct', endpoint: 'chat.completions', stream: false, requestId: 'req_x',
  };
  const job = { replicaId: 'rep_0123456789abcdef01234567', routingReason: 'least_loaded', carrier: {} };
  const request = { method: 'POST', url: '/v1/chat/completions', headers: {} };
  const finished = { outcome: 'succeeded', promptTokens: 12, completionTokens: 34, cachedTokens: 0, replicaId: job.replicaId, finishReason: 'stop', errorCode: null };
  return {
    root,
    one(index: number): void {
      const requestId = `req_${index}`;
      const span = startRequestSpan(tracing, request, '/v1/chat/completions', requestId);
      traceparentHeader(span);
      tracing.runIn(span, () => {
        const spans = new RequestSpans(tracing, workTraceOf(requestId, span).parent, owner, GPU_HOURS, Date.now());
        spans.dispatching();
        spans.placed(job);
        spans.finished(finished);
        endRequestSpan(span, 200, owner.deploymentId);
      });
    },
    flush: () => processor.forceFlush(),
    dropped: () => processor.droppedSpans,
  };
}

const BATCH = 2_000;
const WARM_ROUNDS = 5;

async function main(): Promise<void> {
  const { values, positionals } = parseArgs({ options: { rounds: { type: 'string', default: '60' } }, allowPositionals: true });
  if (positionals.length !== 2) throw new Error('usage: node dist/bench/tracing-ab.js DIR_A DIR_B (two built checkouts)');
  const builds = positionals.map((root) => build(path.resolve(root)));
  const rounds = Number(values.rounds);
  const micros: number[][] = builds.map(() => []);
  let index = 0;
  for (let round = 0; round < rounds; round++) {
    // Each round runs both, in turn first (neither always meets the warmer or the colder moment).
    for (let turn = 0; turn < builds.length; turn++) {
      const which = (round + turn) % builds.length;
      const started = process.hrtime.bigint();
      for (let count = 0; count < BATCH; count++) {
        builds[which].one(index++);
        // The processor sends between requests, as it does between a server's requests.
        if (count % 64 === 0) await new Promise(setImmediate);
      }
      await builds[which].flush();
      if (round >= WARM_ROUNDS) micros[which].push(Number(process.hrtime.bigint() - started) / BATCH / 1_000);
    }
  }
  const [a, b] = micros;
  console.log(JSON.stringify({
    microsPerRequest: Object.fromEntries(builds.map((one, which) => [one.root, median(micros[which])])),
    bMinusAMedian: median(a.map((value, round) => b[round] - value)),
    bFasterInRounds: `${a.filter((value, round) => b[round] < value).length}/${a.length}`,
    dropped: builds.map((one) => one.dropped()),
  }, null, 1));
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
