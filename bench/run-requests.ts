/**
 * `npm run bench:requests`: the async request path on PostgreSQL. A server process with an
 * image deployment whose agents call an instant image engine (a 1×1 PNG), so what is measured
 * is the platform: insert + NOTIFY, SKIP LOCKED claim, presigning, Assign over gRPC, the
 * agent's upload, and the terminal UPDATE. Reports submit → start latency (from the records'
 * own timestamps, one database clock) at a light paced rate, and jobs/s for a burst.
 * Flags: --database-url URL (default: embedded PostgreSQL) --replicas 2 --slots 8 --burst 2000
 *        --rate 20 --seconds 10
 */
import fs from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { Client } from 'pg';
import { describeMachine } from './machine';
import { percentile } from './paced-client';
import { ServerProcess, until } from './server-process';
import { PROJECT_ROOT, startUpstreamProcess } from './targets';
import { freshResultName } from './report';

const MODEL = 'black-forest-labs/FLUX.1-schnell';

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      'database-url': { type: 'string' }, replicas: { type: 'string', default: '2' }, slots: { type: 'string', default: '8' },
      burst: { type: 'string', default: '2000' }, rate: { type: 'string', default: '20' }, seconds: { type: 'string', default: '10' },
    },
  });
  const upstream = await startUpstreamProcess(null);
  const server = await ServerProcess.start({
    name: 'bench-requests', databaseUrl: values['database-url'],
    env: { LOCAL_ENGINE: 'openai', LOCAL_ENGINE_URL: upstream.url, LOCAL_MEDIA_AGENT_MAX_CONCURRENCY: values.slots as string, MAX_QUEUED_PER_DEPLOYMENT: '100000' },
  }).catch(async (error) => {
    await upstream.stop();
    throw error;
  });
  const database = new Client({ connectionString: server.databaseUrl });
  try {
    const { baseUrl, key } = server;
    const created = await server.graphql(`mutation { createDeployment(input: {modelId: "${MODEL}", priceCapPerHour: 2, minReplicas: ${values.replicas}, maxReplicas: ${values.replicas}}) { deployment { id slug } } }`);
    const deployment = created.createDeployment.deployment as { id: string; slug: string };
    const endpoint = `${baseUrl}/d/${deployment.slug}/v1`;
    await database.connect();
    // Warm: the deployment's agents have joined once a job has gone all the way through.
    const first = await submit(endpoint, key);
    await until(async () => (await database.query(`SELECT status FROM request_records WHERE id = $1`, [first.id])).rows[0]?.status === 'succeeded', 60_000, 'a first job to succeed');

    console.log(`paced: ${values.rate} jobs/s for ${values.seconds} s`);
    const paced = await pacedPhase(endpoint, key, Number(values.rate), Number(values.seconds));
    await until(async () => (await countOpen(database, deployment.id)) === 0, 120_000, 'paced jobs to finish');
    const pacedDelays = await delays(database, paced.ids);

    console.log(`burst: ${values.burst} jobs, 32 submitters`);
    const burst = await burstPhase(endpoint, key, Number(values.burst));
    await until(async () => (await countOpen(database, deployment.id)) === 0, 600_000, 'burst jobs to finish');
    const burstStats = await throughput(database, burst.ids);
    const burstDelays = await delays(database, burst.ids);

    const results = {
      machine: describeMachine(), database: values['database-url'] ? 'external PostgreSQL' : 'embedded PostgreSQL 17',
      options: { replicas: Number(values.replicas), slotsPerReplica: Number(values.slots), rate: Number(values.rate), seconds: Number(values.seconds), burst: Number(values.burst) },
      paced: { submitted: paced.ids.length, submitMs: summary(paced.submitMs), submitToStartMs: summary(pacedDelays.startMs), submitToDoneMs: summary(pacedDelays.doneMs), failed: pacedDelays.failed },
      burst: { submitted: burst.ids.length, submitPerSecond: burst.ids.length / burst.seconds, jobsPerSecond: burstStats.jobsPerSecond, submitToStartMs: summary(burstDelays.startMs), failed: burstDelays.failed },
    };
    write(results);
  } finally {
    await database.end().catch(() => {});
    await server.stop();
    await upstream.stop();
  }
}

async function submit(endpoint: string, key: string): Promise<{ status: number; id: string }> {
  const response = await fetch(`${endpoint}/images/generations?async=true`, {
    method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: MODEL, prompt: 'benchmark', size: '512x512' }),
  });
  const body = (await response.json()) as { id: string };
  return { status: response.status, id: body.id };
}

async function pacedPhase(endpoint: string, key: string, rate: number, seconds: number) {
  const ids: string[] = [];
  const submitMs: number[] = [];
  const started = performance.now();
  const pending: Array<Promise<void>> = [];
  for (let index = 0; index < rate * seconds; index++) {
    const due = started + (index * 1000) / rate;
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, due - performance.now())));
    pending.push((async () => {
      const sentAt = performance.now();
      const { status, id } = await submit(endpoint, key);
      if (status === 202) ids.push(id);
      submitMs.push(performance.now() - sentAt);
    })());
  }
  await Promise.all(pending);
  return { ids, submitMs };
}

async function burstPhase(endpoint: string, key: string, count: number) {
  const ids: string[] = [];
  let next = 0;
  const started = performance.now();
  await Promise.all(Array.from({ length: 32 }, async () => {
    while (next < count) {
      next++;
      const { status, id } = await submit(endpoint, key);
      if (status === 202) ids.push(id);
    }
  }));
  return { ids, seconds: (performance.now() - started) / 1000 };
}

async function countOpen(database: Client, deploymentId: string): Promise<number> {
  const { rows } = await database.query(`SELECT count(*)::int AS open FROM request_records WHERE deployment_id = $1 AND status IN ('queued', 'running')`, [deploymentId]);
  return rows[0].open;
}

async function delays(database: Client, ids: string[]) {
  const { rows } = await database.query(`
    SELECT status, extract(epoch FROM started_at - queued_at) * 1000 AS start_ms, extract(epoch FROM completed_at - queued_at) * 1000 AS done_ms
    FROM request_records WHERE id = ANY($1)`, [ids]);
  return {
    startMs: rows.filter((row) => row.start_ms !== null).map((row) => Number(row.start_ms)),
    doneMs: rows.filter((row) => row.done_ms !== null).map((row) => Number(row.done_ms)),
    failed: rows.filter((row) => row.status !== 'succeeded').length,
  };
}

async function throughput(database: Client, ids: string[]) {
  const { rows } = await database.query(`SELECT extract(epoch FROM max(completed_at) - min(queued_at)) AS seconds, count(*)::int AS done FROM request_records WHERE id = ANY($1) AND status = 'succeeded'`, [ids]);
  return { jobsPerSecond: rows[0].done / Number(rows[0].seconds) };
}

function summary(values: number[]) {
  const sorted = [...values].sort((left, right) => left - right);
  const round = (value: number) => Math.round(value * 100) / 100;
  return { count: sorted.length, p50: round(percentile(sorted, 0.5)), p90: round(percentile(sorted, 0.9)), p99: round(percentile(sorted, 0.99)), max: round(sorted.at(-1) ?? NaN) };
}



function write(results: any): void {
  const directory = path.join(PROJECT_ROOT, 'bench/results');
  const stamp = freshResultName(directory, `requests-${new Date().toISOString().slice(0, 10)}-${results.machine.gitSha}-${results.database.startsWith('embedded') ? 'embedded' : 'external'}`);
  fs.writeFileSync(path.join(directory, `${stamp}.json`), JSON.stringify(results, null, 2));
  const row = (name: string, stats: { p50: number; p90: number; p99: number; max: number; count: number }) => `| ${name} | ${stats.count} | ${stats.p50} | ${stats.p90} | ${stats.p99} | ${stats.max} |`;
  const markdown = [
    `# Async requests benchmark ${stamp}`, '',
    `Machine: ${results.machine.cpu}, ${results.machine.cores} cores; Node ${results.machine.node}; ${results.database}.`,
    `Setup: one image deployment, ${results.options.replicas} replicas × ${results.options.slotsPerReplica} slots, engine = an instant image server (1×1 PNG), managed local storage.`, '',
    `## Latency at ${results.options.rate} jobs/s (${results.options.seconds} s, paced)`, '',
    '| measure (ms) | jobs | p50 | p90 | p99 | max |', '|---|---:|---:|---:|---:|---:|',
    row('submit (HTTP 202)', results.paced.submitMs), row('submit → start (queued_at → started_at)', results.paced.submitToStartMs),
    row('submit → done (queued_at → completed_at)', results.paced.submitToDoneMs), '',
    `## Burst of ${results.options.burst} jobs (32 concurrent submitters)`, '',
    `Submissions: ${results.burst.submitPerSecond.toFixed(0)} per second; completed: **${results.burst.jobsPerSecond.toFixed(0)} jobs/s** (first queued → last completed); failed: ${results.burst.failed}.`, '',
    '| measure (ms) | jobs | p50 | p90 | p99 | max |', '|---|---:|---:|---:|---:|---:|',
    row('submit → start under the burst (queueing included)', results.burst.submitToStartMs), '',
  ].join('\n');
  fs.writeFileSync(path.join(directory, `${stamp}.md`), markdown);
  console.log(`\n${markdown}\nwrote bench/results/${stamp}.{json,md}`);
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
