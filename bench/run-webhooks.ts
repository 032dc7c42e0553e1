/**
 * `npm run bench:webhooks`: signed deliveries per second to a local receiver, and the delay
 * from a request's state change (its cancel, committed with the event in one transaction) to
 * the first attempt reaching the receiver. A server process on the embedded PostgreSQL (or
 * `--database-url`), the receiver in this process.
 * Flags: --rate 20 --seconds 10 --burst 2000 --database-url URL
 */
import fs from 'node:fs';
import http from 'node:http';
import type net from 'node:net';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { Client } from 'pg';
import { describeMachine } from './machine';
import { percentile } from './paced-client';
import { ServerProcess, until } from './server-process';
import { PROJECT_ROOT } from './targets';
import { freshResultName } from './report';

const MODEL = 'black-forest-labs/FLUX.1-schnell';

async function main(): Promise<void> {
  const { values } = parseArgs({ options: {
    rate: { type: 'string', default: '20' }, seconds: { type: 'string', default: '10' }, burst: { type: 'string', default: '2000' }, 'database-url': { type: 'string' },
  } });
  const received = new Map<string, number>();
  let deliveries = 0;
  const receiver = http.createServer((request, response) => {
    const parts: Buffer[] = [];
    request.on('data', (part) => parts.push(part));
    request.on('end', () => {
      const event = JSON.parse(Buffer.concat(parts).toString('utf8')) as { id: string; data: { id?: string } };
      deliveries++;
      if (!received.has(event.data.id ?? event.id)) received.set(event.data.id ?? event.id, Date.now());
      response.writeHead(204).end();
    });
  });
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  const receiverUrl = `http://127.0.0.1:${(receiver.address() as net.AddressInfo).port}/hook`;

  const server = await ServerProcess.start({
    name: 'bench-webhooks', databaseUrl: values['database-url'],
    env: { LOCAL_AGENTS: 'false', WEBHOOK_ALLOW_INSECURE_LOOPBACK: 'true', MAX_QUEUED_PER_DEPLOYMENT: '1000000' },
  });
  const database = new Client({ connectionString: server.databaseUrl });
  try {
    const { baseUrl, key } = server;
    const graphql = (query: string, variables: Record<string, unknown> = {}) => server.graphql(query, variables);
    const endpoint = (await graphql('mutation($url: String!) { createWebhookEndpoint(input: {url: $url}) { id } }', { url: receiverUrl })).createWebhookEndpoint;
    // No replicas: requests stay queued until canceled, and the cancel is the state change measured.
    const deployment = (await graphql(`mutation { createDeployment(input: {modelId: "${MODEL}", priceCapPerHour: 2}) { deployment { slug } } }`)).createDeployment.deployment;
    const endpointUrl = `${baseUrl}/d/${deployment.slug}/v1`;
    const call = async (pathname: string, body: unknown) => (await (await fetch(`${endpointUrl}${pathname}`, {
      method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: JSON.stringify(body),
    })).json()) as { id: string };
    await database.connect();

    console.log(`paced: ${values.rate} state changes/s for ${values.seconds} s`);
    const ids: string[] = [];
    const started = performance.now();
    for (let index = 0; index < Number(values.rate) * Number(values.seconds); index++) {
      await new Promise((resolve) => setTimeout(resolve, Math.max(0, started + (index * 1000) / Number(values.rate) - performance.now())));
      const { id } = await call('/images/generations?async=true', { model: MODEL, prompt: 'bench', size: '512x512' });
      await call(`/requests/${id}/cancel`, {});
      ids.push(id);
    }
    await until(() => ids.every((id) => received.has(id)), 60_000, 'every paced delivery');
    const { rows } = await database.query(`SELECT request_id, extract(epoch FROM created_at) * 1000 AS at FROM webhook_events WHERE request_id = ANY($1)`, [ids]);
    const delays = rows.map((row) => received.get(row.request_id)! - Number(row.at)).sort((left, right) => left - right);

    console.log(`burst: ${values.burst} test sends`);
    const before = deliveries;
    const burstStarted = Date.now();
    let sent = 0;
    await Promise.all(Array.from({ length: 16 }, async () => {
      while (sent < Number(values.burst)) {
        sent++;
        await graphql('mutation($id: ID!) { sendTestWebhook(endpointId: $id) { id } }', { id: endpoint.id });
      }
    }));
    const enqueuedSeconds = (Date.now() - burstStarted) / 1000;
    await until(() => deliveries - before >= Number(values.burst), 300_000, 'every burst delivery');
    const burstSeconds = (Date.now() - burstStarted) / 1000;
    const round = (value: number) => Math.round(value * 100) / 100;
    const results = {
      machine: describeMachine(), database: values['database-url'] ? 'external PostgreSQL' : 'embedded PostgreSQL 17',
      options: { rate: Number(values.rate), seconds: Number(values.seconds), burst: Number(values.burst) },
      stateChangeToFirstAttemptMs: { count: delays.length, p50: round(percentile(delays, 0.5)), p90: round(percentile(delays, 0.9)), p99: round(percentile(delays, 0.99)), max: round(delays.at(-1)!) },
      burst: { enqueuedPerSecond: round(Number(values.burst) / enqueuedSeconds), deliveriesPerSecond: round(Number(values.burst) / burstSeconds) },
    };
    write(results);
  } finally {
    await database.end().catch(() => {});
    await server.stop();
    receiver.close();
  }
}


function write(results: any): void {
  const directory = path.join(PROJECT_ROOT, 'bench/results');
  const stamp = freshResultName(directory, `webhooks-${new Date().toISOString().slice(0, 10)}-${results.machine.gitSha}`);
  fs.writeFileSync(path.join(directory, `${stamp}.json`), JSON.stringify(results, null, 2));
  const delay = results.stateChangeToFirstAttemptMs;
  const markdown = [
    `# Webhook delivery benchmark ${stamp}`, '',
    `Machine: ${results.machine.cpu}, ${results.machine.cores} cores; Node ${results.machine.node}; ${results.database}. Receiver: plain node:http on loopback, answers 204.`, '',
    `State change (a request's cancel, committed with its event) → first attempt at the receiver, ${results.options.rate}/s for ${results.options.seconds} s:`, '',
    '| jobs | p50 ms | p90 ms | p99 ms | max ms |', '|---:|---:|---:|---:|---:|',
    `| ${delay.count} | ${delay.p50} | ${delay.p90} | ${delay.p99} | ${delay.max} |`, '',
    `Burst of ${results.options.burst} test sends (16 concurrent GraphQL callers): enqueued ${results.burst.enqueuedPerSecond}/s; **${results.burst.deliveriesPerSecond} signed deliveries/s** (first send → last delivery).`, '',
  ].join('\n');
  fs.writeFileSync(path.join(directory, `${stamp}.md`), markdown);
  console.log(`\n${markdown}\nwrote bench/results/${stamp}.{json,md}`);
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
