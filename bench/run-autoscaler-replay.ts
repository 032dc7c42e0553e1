/**
 * `npm run bench:autoscaler-replay`: the request simulator checked against the real control loop
 * (issue 39). A real server (bench/autoscaler-replay-server.ts: a fresh database on
 * TEST_DATABASE_URL's PostgreSQL, else an embedded one) with a short capacity interval spawns
 * real CPU-engine agents of the local provider that act out a GPU-like start-up phase by phase
 * and serve each request as the service model says (a fixed prefill, then the output at a fixed
 * rate per sequence, `slots` at once). A short trace is replayed on it with the official `openai`
 * SDK, streamed, so each request's TTFT is measured where a client sees it, while the replica
 * count is sampled every second over GraphQL. Then `simulateRequests` replays the same trace with
 * the same policy, options, decision interval, slots, service times and the start-up the real
 * replicas measured, and the two are compared: replica-seconds, share within the SLO, TTFT
 * p50/p99, scale-ups, cold starts, requests lost (must be 0).
 * Runs: `slo` and `concurrency` on a ramp with a burst; `sparse`: `slo` with scale to zero on sessions.
 * Results: bench/results/<date>-issue39-autoscaler-replay.{md,json}.
 * Flags: --runs slo,concurrency,sparse --seconds 540 --seed 7 --interval-ms 2000 --database-url <postgres>
 * --tag <word> (appended to the results' name, for a partial run beside a full one)
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import OpenAI, { APIError } from 'openai';
import { Client } from 'pg';
import { Autoscaler } from '../control-plane/autoscaling/autoscaler';
import { requestTrace, sparseTrace, type RequestLengths, type RequestTrace } from '../control-plane/autoscaling/load-traces';
import { simulateRequests, type RequestSimulationResult } from '../control-plane/autoscaling/request-simulator';
import { SloAutoscaler } from '../control-plane/autoscaling/slo-autoscaler';
import type { ScalingPolicy, SloTargets } from '../control-plane/autoscaling/scaling-policy';
import type { ServiceModel } from '../control-plane/autoscaling/service-model';
import { describeMachine, sourceState } from './machine';
import { descendants } from './processes';
import { saveResults } from './report';
import { freePort, PROJECT_ROOT } from './targets';
import { graphqlCall } from './graphql-call';

/** One replica, as the agents act it out and the simulator and the `slo` policy model it. */
const SLOTS = 4;
const PROMPT_TOKENS = 100;
/** The CPU engine's fixed delay before the first token: PROMPT_TOKENS at PREFILL_TOKENS_PER_SECOND. */
const PREFILL_MS = 250;
const DECODE_TOKENS_PER_SECOND = 8;
/** A GPU start-up shortened to fit a short trace (the anchors' 110–140 s, scaled by about 1/7). */
const STARTUP_PHASES = 'download=5000,load=10000,warm_up=1000';
const SLO: SloTargets = { ttftP95Ms: 2_000, tpotP95Ms: null, queueWaitP95Ms: null };
const MAX_REPLICAS = 6;
/** The concurrency policy's windows, on the server (env) and in the simulator alike. */
const AUTOSCALE_WINDOW_MS = 10_000;
const SCALE_DOWN_STABILIZATION_MS = 60_000;
/** GraphQL's lowest scaleToZeroAfterSeconds. */
const SCALE_TO_ZERO_AFTER_S = 60;
const COLD_START_QUEUE_LIMIT = 100;
const LENGTHS: RequestLengths = {
  prompt: { median: PROMPT_TOKENS, sigma: 0, max: PROMPT_TOKENS },
  output: { median: 40, sigma: 0.5, max: 160 },
};
/** About PROMPT_TOKENS tokens of the CPU engine's tokenizer (one a word) with the chat template. */
const PROMPT = Array.from({ length: PROMPT_TOKENS - 8 }, (_, index) => ['the', 'replica', 'serves', 'tokens'][index % 4]).join(' ');

type RunName = 'slo' | 'concurrency' | 'sparse';

interface RunSpec {
  readonly name: RunName;
  readonly policy: 'slo' | 'concurrency';
  readonly trace: RequestTrace;
  readonly scaleToZeroAfterMs: number | null;
}

interface RequestOutcome {
  readonly index: number;
  /** Since the trace's start, ms. */
  readonly sentAtMs: number;
  readonly ttftMs: number | null;
  readonly doneAtMs: number;
  /** ok; refused (503 with Retry-After, as the simulator's bound refuses); failed (anything else: lost). */
  readonly outcome: 'ok' | 'refused' | 'failed';
  readonly error?: string;
}

interface ReplicaRow {
  id: string;
  status: string;
  createdAt: string;
  startedAt: string | null;
  terminatedAt: string | null;
  startupMs: number | null;
}

interface Measured {
  replicaSeconds: number;
  requestsArrived: number;
  requestsServed: number;
  requestsRefused: number;
  requestsLost: number;
  withinSloShare: number;
  ttftP50Ms: number;
  ttftP95Ms: number;
  ttftP99Ms: number;
  scaleUps: number;
  scaleDowns: number;
  coldStarts: number;
  replicaStarts: number;
  peakReplicas: number;
}

interface RunResult {
  run: RunName;
  policy: string;
  trace: { name: string; seconds: number; requests: number; meanOutputTokens: number };
  /** From the deployment's creation (the policy's first decision) to the trace's start, while its first replica started. */
  leadMs: number;
  startupMs: { mean: number; min: number; max: number; starts: number };
  real: Measured;
  simulated: Measured;
  /** Per second: replicas not terminated, ready (Running), desired; and the simulator's current count at that second. */
  timeline: Array<{ second: number; current: number; ready: number; desired: number; simulated: number }>;
  decisions: Array<{ at: number; action: string; reason: string; current: number; desired: number; movedBy: string | null; forecast: number | null; arrivals: number | null }>;
  failures: string[];
}

function rampBurstRates(seconds: number): number[] {
  // 0.4 req/s, a ramp to 1.6, a burst to 3.0 for a ninth of the trace, and back down.
  const at = (fraction: number) => Math.round(fraction * seconds);
  return Array.from({ length: seconds }, (_, second) => {
    if (second < at(1 / 9)) return 0.4;
    if (second < at(7 / 18)) return 0.4 + (1.2 * (second - at(1 / 9))) / (at(7 / 18) - at(1 / 9));
    if (second < at(5 / 9)) return 1.6;
    if (second < at(2 / 3)) return 3.0;
    if (second < at(7 / 9)) return 1.6;
    if (second < at(8 / 9)) return 1.6 - (1.2 * (second - at(7 / 9))) / (at(8 / 9) - at(7 / 9));
    return 0.4;
  });
}

function percentile(values: number[], fraction: number): number {
  if (values.length === 0) return 0;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(fraction * sorted.length) - 1))];
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, Math.max(0, ms)));

/** The replay server: spawned, its one JSON line read, stopped with SIGINT (SIGKILL to its tree if it lingers). */
class ReplayServer {
  url = '';
  apiKey = '';
  modelId = '';
  private readonly child: ChildProcess;
  private output = '';

  constructor(env: Record<string, string>) {
    this.child = spawn(process.execPath, [path.join(PROJECT_ROOT, 'dist/bench/autoscaler-replay-server.js')], { env, stdio: ['pipe', 'pipe', 'pipe'] });
    this.child.stdout!.on('data', (part) => (this.output += part));
    this.child.stderr!.on('data', (part) => (this.output += part));
  }

  async ready(timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const line = this.output.split('\n').find((entry) => entry.startsWith('{"url"'));
      if (line) {
        Object.assign(this, JSON.parse(line));
        return;
      }
      if (this.child.exitCode !== null) throw new Error(`the replay server exited: ${this.output}`);
      if (Date.now() > deadline) throw new Error(`the replay server was not ready within ${timeoutMs} ms: ${this.output}`);
      await sleep(200);
    }
  }

  async graphql(query: string, variables: Record<string, unknown> = {}): Promise<any> {
    return graphqlCall(this.url, this.apiKey, query, variables);
  }

  /** SIGINT drains and stops its agents; past `timeoutMs`, SIGKILL to it and everything it started. */
  async stop(timeoutMs = 40_000): Promise<void> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return;
    const tree = descendants(this.child.pid!);
    const exited = new Promise((resolve) => this.child.once('exit', resolve));
    this.child.kill('SIGINT');
    const timer = setTimeout(() => this.kill(tree), timeoutMs);
    await exited;
    clearTimeout(timer);
  }

  kill(known: number[] = []): void {
    for (const pid of new Set([...known, ...descendants(this.child.pid!), this.child.pid!])) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // gone already
      }
    }
  }
}

const DEPLOYMENT_FIELDS = `id slug desiredReplicas waitingForReplica replicas { id status createdAt startedAt terminatedAt startupMs }`;

async function replay(server: ReplayServer, spec: RunSpec, intervalMs: number): Promise<RunResult> {
  const { trace } = spec;
  const created = await server.graphql(`mutation($input: CreateDeploymentInput!) { createDeployment(input: $input) { deployment { id slug } } }`, {
    input: {
      modelId: server.modelId, priceCapPerHour: 2, minReplicas: 1, maxReplicas: MAX_REPLICAS, autoscale: true, routingPolicy: 'least-loaded',
      scalingPolicy: spec.policy === 'slo' ? 'SLO' : 'CONCURRENCY', slo: { ttftP95Ms: SLO.ttftP95Ms },
      scaleToZeroAfterSeconds: spec.scaleToZeroAfterMs === null ? null : spec.scaleToZeroAfterMs / 1000, coldStartQueueLimit: COLD_START_QUEUE_LIMIT,
    },
  });
  const deployment = created.createDeployment.deployment as { id: string; slug: string };
  // The policy decides from the deployment's creation, while its first replica starts: the simulator gets that lead too.
  const createdWall = Date.now();
  const state = async () => (await server.graphql(`query($id: ID!) { deployment(id: $id) { ${DEPLOYMENT_FIELDS}
    scalingDecisions(limit: 500) { decidedAt action reason currentReplicas desiredReplicas movedBy forecastArrivalsPerSecond arrivalsPerSecond } } }`, { id: deployment.id })).deployment;
  // The simulator starts with one ready replica: so does the real run.
  for (const deadline = Date.now() + 180_000; ;) {
    const now = await state();
    if (now.replicas.some((replica: ReplicaRow) => replica.status === 'Running')) break;
    if (Date.now() > deadline) throw new Error(`${spec.name}: no ready replica within 180 s`);
    await sleep(500);
  }
  const client = new OpenAI({ baseURL: `${server.url}/d/${deployment.slug}/v1`, apiKey: server.apiKey, maxRetries: 0, timeout: 900_000 });
  const startWall = Date.now();
  const start = performance.now();
  const outcomes: RequestOutcome[] = [];
  const timeline: RunResult['timeline'] = [];
  let replaying = true;
  const sampler = (async () => {
    for (let second = 0; replaying; second++) {
      await sleep(start + second * 1000 - performance.now());
      try {
        const now = await state();
        const live = now.replicas.filter((replica: ReplicaRow) => replica.status !== 'Terminated');
        timeline.push({ second, current: live.length, ready: live.filter((replica: ReplicaRow) => replica.status === 'Running').length, desired: now.desiredReplicas, simulated: 0 });
      } catch {
        // a missed sample; the next one comes in a second
      }
    }
  })();
  const send = async (index: number) => {
    const sentAtMs = performance.now() - start;
    let ttftMs: number | null = null;
    try {
      const stream = await client.chat.completions.create({
        model: server.modelId, messages: [{ role: 'user', content: PROMPT }], max_tokens: trace.outputTokens[index], stream: true,
      });
      for await (const chunk of stream) {
        if (ttftMs === null && chunk.choices[0]?.delta?.content) ttftMs = performance.now() - start - sentAtMs;
      }
      outcomes.push({ index, sentAtMs, ttftMs, doneAtMs: performance.now() - start, outcome: ttftMs === null ? 'failed' : 'ok', ...(ttftMs === null ? { error: 'no content' } : {}) });
    } catch (error) {
      const refused = error instanceof APIError && error.status === 503 && error.headers?.get('retry-after') !== null;
      outcomes.push({ index, sentAtMs, ttftMs, doneAtMs: performance.now() - start, outcome: refused ? 'refused' : 'failed', error: String(error).slice(0, 200) });
    }
  };
  const inFlight: Array<Promise<void>> = [];
  for (let index = 0; index < trace.arrivalMs.length; index++) {
    await sleep(start + trace.arrivalMs[index] - performance.now());
    inFlight.push(send(index));
    if (index % 100 === 0) console.log(`${spec.name}: request ${index}/${trace.arrivalMs.length} at ${((performance.now() - start) / 1000).toFixed(0)} s`);
  }
  await sleep(start + trace.seconds * 1000 - performance.now());
  await Promise.all(inFlight);
  const endMs = Math.max(trace.seconds * 1000, ...outcomes.map((outcome) => outcome.doneAtMs));
  replaying = false;
  await sampler;
  const final = await state();
  await server.graphql(`mutation($id: ID!) { deleteDeployment(id: $id) { id } }`, { id: deployment.id });
  // Its agents stop before the next run starts, so they do not share the machine with it.
  for (const deadline = Date.now() + 60_000; Date.now() < deadline; await sleep(500)) {
    const gone = await state().then((now) => now.replicas.every((replica: ReplicaRow) => replica.status === 'Terminated'), () => true);
    if (gone) break;
  }

  // Real: replica time within the trace (from t0, or the order, to the release, or the end).
  const wallEnd = startWall + endMs;
  const replicas = final.replicas as ReplicaRow[];
  const replicaSeconds = replicas.reduce((sum, replica) => {
    const from = Math.max(startWall, Date.parse(replica.createdAt));
    const to = Math.min(wallEnd, replica.terminatedAt ? Date.parse(replica.terminatedAt) : wallEnd);
    return sum + Math.max(0, to - from) / 1000;
  }, 0);
  const started = replicas.filter((replica) => Date.parse(replica.createdAt) >= startWall && replica.startupMs !== null);
  const startups = started.map((replica) => replica.startupMs!);
  const decisions = (final.scalingDecisions as Array<{ decidedAt: string; action: string; reason: string; currentReplicas: number; desiredReplicas: number; movedBy: string | null; forecastArrivalsPerSecond: number | null; arrivalsPerSecond: number | null }>)
    .map((decision) => ({
      at: Date.parse(decision.decidedAt) - startWall, action: decision.action, reason: decision.reason, current: decision.currentReplicas, desired: decision.desiredReplicas,
      movedBy: decision.movedBy, forecast: decision.forecastArrivalsPerSecond, arrivals: decision.arrivalsPerSecond,
    }))
    .filter((decision) => decision.at >= 0 && decision.at <= endMs).sort((a, b) => a.at - b.at);
  const served = outcomes.filter((outcome) => outcome.outcome === 'ok');
  const ttfts = served.map((outcome) => outcome.ttftMs!);
  const real: Measured = {
    replicaSeconds,
    requestsArrived: outcomes.length, requestsServed: served.length,
    requestsRefused: outcomes.filter((outcome) => outcome.outcome === 'refused').length,
    requestsLost: outcomes.filter((outcome) => outcome.outcome === 'failed').length,
    withinSloShare: outcomes.length === 0 ? 1 : ttfts.filter((ttft) => ttft <= SLO.ttftP95Ms!).length / outcomes.length,
    ttftP50Ms: percentile(ttfts, 0.5), ttftP95Ms: percentile(ttfts, 0.95), ttftP99Ms: percentile(ttfts, 0.99),
    scaleUps: decisions.filter((decision) => decision.action === 'scale_up').length,
    scaleDowns: decisions.filter((decision) => decision.action === 'scale_down').length,
    coldStarts: decisions.filter((decision) => decision.reason === 'cold_start').length,
    replicaStarts: replicas.filter((replica) => Date.parse(replica.createdAt) >= startWall && Date.parse(replica.createdAt) <= wallEnd).length,
    peakReplicas: Math.max(0, ...timeline.map((sample) => sample.current)),
  };

  // Simulated: the same trace, policy, options and interval, with the start-up the real replicas took.
  const meanStartup = startups.length > 0 ? startups.reduce((a, b) => a + b, 0) / startups.length : 20_000;
  const jitter = startups.length > 1 ? Math.min((Math.max(...startups) - Math.min(...startups)) / 2, meanStartup * 0.9) : 0;
  const model: ServiceModel = {
    slots: SLOTS, prefillTokensPerSecond: (PROMPT_TOKENS * 1000) / PREFILL_MS, decodeTokensPerSecond: DECODE_TOKENS_PER_SECOND, prefixHitRate: 0,
    meanPromptTokens: PROMPT_TOKENS, meanOutputTokens: meanOf(trace.outputTokens), startupMs: meanStartup,
  };
  const policy: ScalingPolicy<any> = spec.policy === 'slo'
    ? new SloAutoscaler()
    : new Autoscaler({ windowMs: AUTOSCALE_WINDOW_MS, scaleDownStabilizationMs: SCALE_DOWN_STABILIZATION_MS });
  // The lead before the trace: no arrivals, one replica (paid from the creation there, from t0 here: taken off below).
  const leadMs = startWall - createdWall;
  const led: RequestTrace = { ...trace, seconds: trace.seconds + leadMs / 1000, arrivalMs: trace.arrivalMs.map((at) => at + leadMs) };
  const sim = simulateRequests({
    trace: led, model, policy, slo: SLO, targetConcurrency: SLOTS, minReplicas: 1, maxReplicas: MAX_REPLICAS,
    initialReplicas: 1, startupJitterMs: jitter, decisionIntervalMs: intervalMs,
    scaleToZeroAfterMs: spec.scaleToZeroAfterMs, coldStartQueueLimit: COLD_START_QUEUE_LIMIT,
  });
  const simulatedCount = simulatedReplicasPerSecond(sim, Math.ceil(endMs / 1000), leadMs);
  for (const sample of timeline) sample.simulated = simulatedCount[sample.second] ?? 0;
  const simTtfts = Array.from(sim.ttftByRequest).filter((value) => !Number.isNaN(value));
  return {
    run: spec.name, policy: spec.policy,
    trace: { name: trace.name, seconds: trace.seconds, requests: trace.arrivalMs.length, meanOutputTokens: model.meanOutputTokens },
    leadMs,
    startupMs: { mean: Math.round(meanStartup), min: Math.round(Math.min(...startups)), max: Math.round(Math.max(...startups)), starts: startups.length },
    real,
    simulated: {
      replicaSeconds: sim.replicaSeconds - leadMs / 1000, requestsArrived: sim.requestsArrived, requestsServed: sim.requestsServed, requestsRefused: sim.requestsRefused,
      requestsLost: sim.requestsLost, withinSloShare: sim.withinSloShare,
      ttftP50Ms: percentile(simTtfts, 0.5), ttftP95Ms: percentile(simTtfts, 0.95), ttftP99Ms: percentile(simTtfts, 0.99),
      scaleUps: sim.scaleUps, scaleDowns: sim.scaleDowns, coldStarts: sim.coldStarts, replicaStarts: sim.replicaStarts, peakReplicas: sim.peakReplicas,
    },
    timeline, decisions,
    failures: outcomes.filter((outcome) => outcome.outcome !== 'ok').slice(0, 20).map((outcome) => `#${outcome.index} ${outcome.outcome}: ${outcome.error}`),
  };
}

function meanOf(values: Uint32Array): number {
  return values.length === 0 ? 0 : values.reduce((sum, value) => sum + value, 0) / values.length;
}

/** The simulator's replica count (ordered, not yet released) per second of the trace, from its decisions (its clock starts `leadMs` earlier). */
function simulatedReplicasPerSecond(sim: RequestSimulationResult, seconds: number, leadMs: number): number[] {
  const counts: number[] = [];
  let decision = 0;
  let desired = 1;
  for (let second = 0; second <= seconds; second++) {
    while (decision < sim.decisions.length && sim.decisions[decision].at <= leadMs + second * 1000) desired = sim.decisions[decision++].desiredReplicas;
    counts.push(desired);
  }
  return counts;
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      runs: { type: 'string', default: 'slo,concurrency,sparse' }, seconds: { type: 'string', default: '540' }, seed: { type: 'string', default: '7' },
      'interval-ms': { type: 'string', default: '2000' }, tag: { type: 'string' }, 'database-url': { type: 'string', default: process.env.TEST_DATABASE_URL },
    },
  });
  const seconds = Number(values.seconds);
  const seed = Number(values.seed);
  const intervalMs = Number(values['interval-ms']);
  const runs = values.runs.split(',') as RunName[];
  const rampBurst = requestTrace('ramp-burst', rampBurstRates(seconds), LENGTHS, seed);
  const sessions = sparseTrace({ seconds, meanIdleSeconds: 150, sessionSeconds: [40, 80], sessionRate: [0.5, 1.5], seed });
  const sparse = requestTrace('sparse', sessions.trace, LENGTHS, seed);
  console.log(`sparse sessions: ${sessions.sessions.map((session) => `${session.atSecond}s+${session.seconds}s@${session.rate.toFixed(2)}`).join(', ')}`);
  const specs: RunSpec[] = runs.map((name) => {
    if (name === 'slo') return { name, policy: 'slo', trace: rampBurst, scaleToZeroAfterMs: null };
    if (name === 'concurrency') return { name, policy: 'concurrency', trace: rampBurst, scaleToZeroAfterMs: null };
    if (name === 'sparse') return { name, policy: 'slo', trace: sparse, scaleToZeroAfterMs: SCALE_TO_ZERO_AFTER_S * 1000 };
    throw new Error(`--runs: unknown run ${name} (slo, concurrency, sparse)`);
  });

  // A database of its own: on the given PostgreSQL (created and dropped here), else embedded in the data directory.
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'bench-autoscaler-replay-'));
  fs.chmodSync(dataDir, 0o755);
  let databaseUrl: string | undefined;
  const adminUrl = values['database-url'];
  if (adminUrl) {
    const url = new URL(adminUrl);
    url.pathname = `/bench_replay_${randomBytes(4).toString('hex')}`;
    databaseUrl = url.toString();
    await withAdmin(adminUrl, (admin) => admin.query(`CREATE DATABASE ${url.pathname.slice(1)}`));
  }
  const server = new ReplayServer({
    PATH: process.env.PATH ?? '', DATA_DIR: dataDir, PORT: '0', HOST: '127.0.0.1', GRPC_PORT: '0', GRPC_HOST: '127.0.0.1', LOG_LEVEL: 'warn',
    ...(databaseUrl ? { DATABASE_URL: databaseUrl } : { EMBEDDED_DATABASE_PORT: String(await freePort()) }),
    CAPACITY_INTERVAL_MS: String(intervalMs), AUTOSCALE_WINDOW_MS: String(AUTOSCALE_WINDOW_MS),
    AUTOSCALE_SCALE_DOWN_STABILIZATION_MS: String(SCALE_DOWN_STABILIZATION_MS), AGENT_HEARTBEAT_INTERVAL_MS: '1000',
    LOCAL_AGENT_MAX_CONCURRENCY: String(SLOTS), COLD_START_ESTIMATE_MS: '20000',
    BENCH_REPLAY_SERVER: JSON.stringify({
      localAgentEnv: {
        WORKER_STARTUP_PHASES_MS: STARTUP_PHASES, WORKER_CPU_TTFT_MS: String(PREFILL_MS), WORKER_CPU_TOKENS_PER_SECOND: String(DECODE_TOKENS_PER_SECOND),
        WORKER_LOG_LEVEL: 'warn', WORKER_DRAIN_TIMEOUT_MS: '60000',
      },
      model: {
        id: 'bench/replay-chat', name: 'Autoscaler replay (CPU engine)', targetConcurrency: SLOTS,
        service: {
          slots: SLOTS, prefillTokensPerSecond: (PROMPT_TOKENS * 1000) / PREFILL_MS, decodeTokensPerSecond: DECODE_TOKENS_PER_SECOND,
          meanPromptTokens: PROMPT_TOKENS, meanOutputTokens: Math.round(meanOf(rampBurst.outputTokens)), startupSeconds: 20,
        },
      },
    }),
  });
  let cleanedUp = false;
  const cleanUp = async () => {
    if (cleanedUp) return;
    cleanedUp = true;
    await server.stop();
    fs.rmSync(dataDir, { recursive: true, force: true });
    if (databaseUrl && adminUrl) await withAdmin(adminUrl, (admin) => admin.query(`DROP DATABASE IF EXISTS ${new URL(databaseUrl!).pathname.slice(1)} WITH (FORCE)`)).catch(() => {});
  };
  process.once('SIGINT', () => {
    console.error('interrupted: stopping the server and its agents');
    void cleanUp().finally(() => process.exit(130));
  });
  const results: RunResult[] = [];
  const loadAverages: number[][] = [];
  try {
    await server.ready(180_000);
    for (const spec of specs) {
      console.log(`run ${spec.name}: ${spec.trace.arrivalMs.length} requests over ${spec.trace.seconds} s`);
      results.push(await replay(server, spec, intervalMs));
      loadAverages.push(os.loadavg());
      const last = results.at(-1)!;
      console.log(`${spec.name}: real ${JSON.stringify(last.real)}\n${spec.name}: simulated ${JSON.stringify(last.simulated)}`);
    }
  } finally {
    await cleanUp();
  }
  report(results, { seconds, seed, intervalMs, sessions: sessions.sessions, loadAverages }, values.tag);
}

async function withAdmin<T>(url: string, work: (admin: Client) => Promise<T>): Promise<T> {
  const admin = new Client({ connectionString: url });
  await admin.connect();
  try {
    return await work(admin);
  } finally {
    await admin.end();
  }
}

function report(results: RunResult[], setup: { seconds: number; seed: number; intervalMs: number; sessions: unknown; loadAverages: number[][] }, tag?: string): void {
  const machine = describeMachine();
  const source = sourceState();
  const date = new Date().toISOString().slice(0, 10);
  const pct = (share: number) => `${(100 * share).toFixed(2)} %`;
  const rows: Array<[string, (measured: Measured) => string]> = [
    ['replica-seconds (GPU-hours × 3600)', (m) => m.replicaSeconds.toFixed(0)],
    ['within the SLO (TTFT ≤ 2 s)', (m) => pct(m.withinSloShare)],
    ['TTFT p50 / p95 / p99, ms', (m) => `${m.ttftP50Ms.toFixed(0)} / ${m.ttftP95Ms.toFixed(0)} / ${m.ttftP99Ms.toFixed(0)}`],
    ['scale-ups / scale-downs', (m) => `${m.scaleUps} / ${m.scaleDowns}`],
    ['replicas started / peak', (m) => `${m.replicaStarts} / ${m.peakReplicas}`],
    ['cold starts', (m) => String(m.coldStarts)],
    ['requests served / refused / lost', (m) => `${m.requestsServed} / ${m.requestsRefused} / ${m.requestsLost}`],
  ];
  const lines = [
    `# Autoscaler replay: the simulator against the real control loop (${date}, ${String(source.commit).slice(0, 7)})`, '',
    `Machine: ${machine.cpu}, ${machine.cores} cores, ${machine.memoryGiB} GiB, Node ${machine.node}. Load average after each run: ${setup.loadAverages.map((load) => load.map((value) => value.toFixed(2)).join(' ')).join('; ')}.`,
    ...(source.changedOutsideBench.length > 0 ? [`Uncommitted changes outside bench/: ${source.changedOutsideBench.join(', ')}.`] : []), '',
    `Setup: CPU-engine agents of the local provider acting out a start-up of ${STARTUP_PHASES} (plus the agent's own start), ${SLOTS} slots, a fixed ${PREFILL_MS} ms before the first token and ${DECODE_TOKENS_PER_SECOND} tokens/s per sequence; `
      + `capacity loop every ${setup.intervalMs} ms, AUTOSCALE_WINDOW_MS ${AUTOSCALE_WINDOW_MS}, scale-down stabilisation ${SCALE_DOWN_STABILIZATION_MS / 1000} s (the concurrency policy), the slo policy's defaults; `
      + `TTFT SLO ${SLO.ttftP95Ms} ms, replicas 1–${MAX_REPLICAS}, least-loaded routing. Traces of ${setup.seconds} s, seed ${setup.seed}; requests streamed with the openai SDK; TTFT is the first content chunk as the client saw it. `
      + 'The simulator replays the same trace with the same policy and options, decision interval and service model, and the mean (± half the range) start-up the real run\'s replicas measured (placement to ready), '
      + 'after the same lead without arrivals that the real deployment had between its creation and the trace\'s start (its first replica starting; the policy decides from the creation on). Replica-seconds count from the trace\'s start on both sides.', '',
  ];
  for (const result of results) {
    lines.push(`## ${result.run}: policy ${result.policy}, trace ${result.trace.name} (${result.trace.requests} requests, mean output ${result.trace.meanOutputTokens.toFixed(1)} tokens)`, '',
      `Start-up measured on the real replicas: mean ${result.startupMs.mean} ms (${result.startupMs.min}–${result.startupMs.max}, ${result.startupMs.starts} starts). Lead before the trace: ${(result.leadMs / 1000).toFixed(1)} s.`, '',
      '| | real | simulated |', '|---|---:|---:|',
      ...rows.map(([label, value]) => `| ${label} | ${value(result.real)} | ${value(result.simulated)} |`), '');
    if (result.failures.length > 0) lines.push(`Requests not served (first 20): ${result.failures.join('; ')}`, '');
    const every = 30;
    lines.push(`Replicas every ${every} s (real current / ready / desired; simulated): `
      + result.timeline.filter((sample) => sample.second % every === 0).map((sample) => `${sample.second}s ${sample.current}/${sample.ready}/${sample.desired}; ${sample.simulated}`).join(' · '), '');
  }
  saveResults(`${date}-issue39-autoscaler-replay${tag ? `-${tag}` : ''}`, { machine, source, setup: { ...setup, slots: SLOTS, prefillMs: PREFILL_MS, decodeTokensPerSecond: DECODE_TOKENS_PER_SECOND, startupPhases: STARTUP_PHASES, slo: SLO, maxReplicas: MAX_REPLICAS }, results }, lines.join('\n'));
}

main().then(() => process.exit(0), (error) => {
  console.error(error);
  process.exit(1);
});
