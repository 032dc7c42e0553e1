/**
 * `npm run bench:responses`: what the Responses API costs over chat. A server process whose
 * local agents run the built-in CPU engine (instant tokens), so what is measured is the platform.
 * - Gateway CPU per request (the server process's utime + stime over a phase, /proc) for
 *   `/v1/responses` JSON and stream against `/v1/chat/completions` JSON and stream, same prompt
 *   and tokens; phases interleaved over several rounds, median taken.
 * - A `previous_response_id` chain of --turns turns, --chains times: each turn's latency, and the
 *   Responses layer's own share (the turn minus the same conversation sent as one chat call
 *   right after it), at turn 1 and at the last turn.
 * - State lookup with --rows stored responses (seeded by one INSERT … SELECT generate_series):
 *   the store's scoped primary-key query, p50/p99 over --lookups random ids; and `GET
 *   /responses/{id}` end to end.
 * Flags: --database-url URL (default: embedded PostgreSQL) --requests 2000 --concurrency 8 --rounds 3
 *        --turns 50 --chains 5 --rows 1000000 --lookups 5000
 */
import fs from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { Client } from 'pg';
import { describeMachine } from './machine';
import { percentile } from './paced-client';
import { cpuMicros } from './processes';
import { ServerProcess, until } from './server-process';
import { PROJECT_ROOT } from './targets';

const MODEL = 'meta-llama/Llama-3.1-8B-Instruct';
const PROMPT = 'Summarise what a replica of a deployment does in one short paragraph.';
const MAX_TOKENS = 16;

type Kind = 'chat JSON' | 'responses JSON' | 'responses JSON store:false' | 'chat stream' | 'responses stream';
/** `store: false` apart: what the translation costs without the state's INSERT. */
const KINDS: Kind[] = ['chat JSON', 'responses JSON', 'responses JSON store:false', 'chat stream', 'responses stream'];

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      'database-url': { type: 'string' }, requests: { type: 'string', default: '2000' }, concurrency: { type: 'string', default: '8' },
      rounds: { type: 'string', default: '3' }, turns: { type: 'string', default: '50' }, chains: { type: 'string', default: '5' },
      rows: { type: 'string', default: '1000000' }, lookups: { type: 'string', default: '5000' },
    },
  });
  // Limits raised: the bench's own key must never meet them.
  const server = await ServerProcess.start({ name: 'bench-responses', databaseUrl: values['database-url'], env: { DEFAULT_RPM_LIMIT: '1000000000', DEFAULT_TPD_LIMIT: '1000000000000000' } });
  const database = new Client({ connectionString: server.databaseUrl });
  try {
    const created = await server.graphql(`mutation { createDeployment(input: {modelId: "${MODEL}", priceCapPerHour: 2, minReplicas: 1, maxReplicas: 1}) { deployment { id slug } } }`);
    const deployment = created.createDeployment.deployment as { id: string; slug: string };
    const base = `${server.baseUrl}/d/${deployment.slug}/v1`;
    const call = (route: string, body: unknown) => post(`${base}/${route}`, server.key, body);
    await until(async () => (await call('chat/completions', chatBody(false)).then((answer) => answer.status === 200, () => false)), 120_000, 'the replica', 250);
    await database.connect();

    console.log(`CPU per request: ${values.rounds} rounds of ${values.requests} requests per kind, ${values.concurrency} at a time`);
    const cpu = new Map<Kind, number[]>(KINDS.map((kind) => [kind, []]));
    for (const kind of KINDS) await phase(server, base, kind, 200, Number(values.concurrency)); // warm every path
    for (let round = 0; round < Number(values.rounds); round++) {
      for (const kind of KINDS) cpu.get(kind)!.push(await phase(server, base, kind, Number(values.requests), Number(values.concurrency)));
    }
    const cpuMedians = Object.fromEntries(KINDS.map((kind) => [kind, median(cpu.get(kind)!)])) as Record<Kind, number>;

    console.log(`chains: ${values.chains} × ${values.turns} turns`);
    const chain = await chains(base, server.key, Number(values.turns), Number(values.chains));

    console.log(`state lookup: seeding ${values.rows} responses`);
    const lookup = await lookups(database, base, server.key, deployment.id, Number(values.rows), Number(values.lookups));

    const results = {
      machine: describeMachine(), database: values['database-url'] ? 'external PostgreSQL' : 'embedded PostgreSQL 17',
      options: Object.fromEntries(Object.entries(values).filter(([name]) => name !== 'database-url')),
      cpuMicrosPerRequest: cpuMedians, cpuRounds: Object.fromEntries(cpu),
      responsesOverChat: { json: cpuMedians['responses JSON'] / cpuMedians['chat JSON'], stream: cpuMedians['responses stream'] / cpuMedians['chat stream'] },
      chain, lookup,
    };
    write(results);
  } finally {
    await database.end().catch(() => {});
    await server.stop();
  }
}

function chatBody(stream: boolean, messages: unknown[] = [{ role: 'user', content: PROMPT }]) {
  return { messages, max_tokens: MAX_TOKENS, ...(stream ? { stream: true, stream_options: { include_usage: true } } : {}) };
}

function responsesBody(stream: boolean) {
  return { input: PROMPT, max_output_tokens: MAX_TOKENS, ...(stream ? { stream: true } : {}) };
}

async function post(url: string, key: string, body: unknown): Promise<{ status: number; text: string }> {
  const response = await fetch(url, { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: JSON.stringify(body) });
  return { status: response.status, text: await response.text() };
}

/** `count` requests of `kind`, `concurrency` at a time: the server process's CPU microseconds per request. */
async function phase(server: ServerProcess, base: string, kind: Kind, count: number, concurrency: number): Promise<number> {
  const route = kind.startsWith('chat') ? 'chat/completions' : 'responses';
  const stream = kind.endsWith(' stream');
  const body = kind.startsWith('chat') ? chatBody(stream) : { ...responsesBody(stream), ...(kind.endsWith('store:false') ? { store: false } : {}) };
  let next = 0;
  let failed = 0;
  const before = cpuMicros(server.pid);
  await Promise.all(Array.from({ length: concurrency }, async () => {
    while (next < count) {
      next++;
      const answer = await post(`${base}/${route}`, server.key, body);
      if (answer.status !== 200) failed++;
    }
  }));
  const micros = (cpuMicros(server.pid) - before) / count;
  if (failed > 0) throw new Error(`${failed} of ${count} ${kind} requests failed`);
  return micros;
}

/** Chains of `turns` turns: each turn's latency, and the same conversation as one chat call's, by turn. */
async function chains(base: string, key: string, turns: number, count: number) {
  const turnMs: number[][] = Array.from({ length: turns }, () => []);
  const chatMs: number[][] = Array.from({ length: turns }, () => []);
  for (let chain = 0; chain < count; chain++) {
    let previous: string | null = null;
    const messages: unknown[] = [];
    for (let turn = 0; turn < turns; turn++) {
      const input = `Turn ${turn + 1}: tell me one more thing about replicas.`;
      const startedAt = performance.now();
      const answer = await post(`${base}/responses`, key, { input, previous_response_id: previous, max_output_tokens: MAX_TOKENS });
      turnMs[turn].push(performance.now() - startedAt);
      if (answer.status !== 200) throw new Error(`turn ${turn + 1}: ${answer.status} ${answer.text}`);
      const response = JSON.parse(answer.text) as { id: string; output: { content: { text: string }[] }[] };
      previous = response.id;
      messages.push({ role: 'user', content: input });
      const chatStartedAt = performance.now();
      const chat = await post(`${base}/chat/completions`, key, chatBody(false, messages));
      chatMs[turn].push(performance.now() - chatStartedAt);
      if (chat.status !== 200) throw new Error(`chat at turn ${turn + 1}: ${chat.status}`);
      messages.push({ role: 'assistant', content: response.output[0].content[0].text });
    }
  }
  const at = (turn: number) => {
    const responses = median(turnMs[turn]);
    const chat = median(chatMs[turn]);
    return { turnMs: responses, sameConversationAsChatMs: chat, responsesLayerMs: responses - chat };
  };
  return { turns, chains: count, first: at(0), last: at(turns - 1), lastOverFirst: median(turnMs[turns - 1]) / median(turnMs[0]) };
}

/** Seeds `rows` copies of a real stored response, then times the store's lookup and `GET /responses/{id}`. */
async function lookups(database: Client, base: string, key: string, deploymentId: string, rows: number, count: number) {
  const model = await post(`${base}/responses`, key, { input: PROMPT, max_output_tokens: MAX_TOKENS });
  const template = (JSON.parse(model.text) as { id: string }).id;
  const seedStartedAt = performance.now();
  await database.query(`
    INSERT INTO responses (id, workspace_id, deployment_id, api_key_id, model, status, background, previous_response_id, settings, history, input, output,
      usage, error, incomplete_details, created_at, completed_at, expires_at)
    SELECT 'resp_seed' || lpad(g::text, 8, '0'), workspace_id, deployment_id, api_key_id, model, status, background, NULL, settings, history, input, output,
      usage, error, incomplete_details, created_at, completed_at, expires_at
    FROM responses, generate_series(1, $2::int) AS g WHERE id = $1`, [template, rows]);
  await database.query('ANALYZE responses');
  const seedSeconds = (performance.now() - seedStartedAt) / 1000;
  const { rows: [scope] } = await database.query('SELECT workspace_id, deployment_id FROM responses WHERE id = $1', [template]);
  const id = () => `resp_seed${String(1 + Math.floor(Math.random() * rows)).padStart(8, '0')}`;
  const sql = `SELECT * FROM responses response WHERE response.id = $1 AND response.workspace_id = $2 AND response.deployment_id = $3
    AND response.expires_at > clock_timestamp() LIMIT 1`;
  for (let index = 0; index < 200; index++) await database.query(sql, [id(), scope.workspace_id, deploymentId]);
  const queryMs: number[] = [];
  for (let index = 0; index < count; index++) {
    const startedAt = performance.now();
    const found = await database.query(sql, [id(), scope.workspace_id, deploymentId]);
    queryMs.push(performance.now() - startedAt);
    if (found.rows.length !== 1) throw new Error('a seeded response was not found');
  }
  const httpMs: number[] = [];
  for (let index = 0; index < Math.min(count, 2000); index++) {
    const startedAt = performance.now();
    const response = await fetch(`${base}/responses/${id()}`, { headers: { authorization: `Bearer ${key}` } });
    await response.arrayBuffer();
    httpMs.push(performance.now() - startedAt);
    if (response.status !== 200) throw new Error(`GET /responses/{id}: ${response.status}`);
  }
  const { rows: [{ count: stored }] } = await database.query('SELECT count(*)::int AS count FROM responses');
  return { storedResponses: stored, seedSeconds, storeQueryMs: summary(queryMs), getResponseMs: summary(httpMs) };
}

function summary(samples: number[]) {
  const sorted = [...samples].sort((a, b) => a - b);
  return { count: sorted.length, p50: percentile(sorted, 0.5), p99: percentile(sorted, 0.99), max: sorted.at(-1) ?? 0 };
}

function median(samples: number[]): number {
  return summary(samples).p50;
}

function write(results: Record<string, unknown>): void {
  const file = path.join(PROJECT_ROOT, 'bench/results', `${new Date().toISOString().slice(0, 10)}-responses.json`);
  fs.writeFileSync(file, `${JSON.stringify(results, null, 2)}\n`);
  console.log(JSON.stringify(results, null, 2));
  console.log(`written to ${file}`);
}

main().catch((error) => {
  console.error(error);
  process.exitCode = 1;
});
