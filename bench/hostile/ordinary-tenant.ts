/**
 * The ordinary tenant of `bench:hostile`, in the benchmark's own process: what every attack is
 * measured beside. Each part runs until stopped and keeps every answer, timed.
 * - `/healthz` every `probeMs` on schedule whether or not earlier probes were answered (open
 *   loop: a stalled server gets a queue of probes), each on a new connection, as a load
 *   balancer's check would (a server out of descriptors cannot take one);
 * - chat completions to its deployment, one after another, on one keep-alive connection;
 * - GraphQL: `{creditBalance}` (a read) and `createApiKey` (a write), each in a loop of its own
 *   (one after another with a pause), so that a stalled read does not hide the writes;
 * - in phases that ask for it (slow uploads), a small batch file uploaded every second.
 */
import http from 'node:http';
import { sleep } from './attack';
import { call, graphql, multipartFile, type Answer } from './http-call';

export type TenantCall = 'healthz' | 'chat' | 'creditBalance' | 'createApiKey' | 'upload';
export const TENANT_CALLS: TenantCall[] = ['healthz', 'chat', 'creditBalance', 'createApiKey', 'upload'];

export interface TenantOptions {
  readonly port: number;
  readonly key: string;
  /** `/d/<slug>/v1` of the tenant's deployment. */
  readonly basePath: string;
  readonly maxTokens: number;
  readonly probeMs: number;
  readonly graphqlPauseMs: number;
  readonly uploads: boolean;
  readonly timeoutMs: number;
}

export interface RunningTenant {
  readonly samples: Record<TenantCall, Answer[]>;
  /** No new calls; waits for those still out (each bounded by its timeout). */
  stop(): Promise<void>;
}

export function startTenant(options: TenantOptions): RunningTenant {
  const samples = Object.fromEntries(TENANT_CALLS.map((name) => [name, [] as Answer[]])) as Record<TenantCall, Answer[]>;
  let stopped = false;
  const agents: http.Agent[] = [];
  const keepAlive = () => {
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    agents.push(agent);
    return agent;
  };
  const { port, key, timeoutMs } = options;
  const bearer = { authorization: `Bearer ${key}` };

  const pending = new Set<Promise<void>>();
  const startedAt = performance.now();
  let fired = 0;
  let probeTimer: NodeJS.Timeout | null = null;
  const probe = () => {
    const due = Math.floor((performance.now() - startedAt) / options.probeMs) + 1;
    while (!stopped && fired < due) {
      fired++;
      const sent = call({ port, method: 'GET', path: '/healthz', timeoutMs }).then((answer) => void samples.healthz.push(answer));
      pending.add(sent);
      void sent.finally(() => pending.delete(sent));
    }
    if (!stopped) probeTimer = setTimeout(probe, Math.max(1, startedAt + fired * options.probeMs - performance.now()));
  };
  probe();

  const loop = async (each: () => Promise<void>) => {
    while (!stopped) await each();
  };
  const chatAgent = keepAlive();
  const chatBody = JSON.stringify({ messages: [{ role: 'user', content: 'Say hello in a few words.' }], max_tokens: options.maxTokens });
  const chat = loop(async () => {
    const answer = await call({ port, method: 'POST', path: `${options.basePath}/chat/completions`, headers: { ...bearer, 'content-type': 'application/json' }, body: chatBody, agent: chatAgent, timeoutMs });
    samples.chat.push(answer);
    if (answer.error) await sleep(50);
  });
  const readAgent = keepAlive();
  const reads = loop(async () => {
    samples.creditBalance.push(await graphql(port, key, '{ creditBalance }', {}, { agent: readAgent, timeoutMs }));
    await sleep(options.graphqlPauseMs);
  });
  const writeAgent = keepAlive();
  let written = 0;
  const writes = loop(async () => {
    const query = 'mutation($name: String!) { createApiKey(input: {name: $name}) { apiKey { id } } }';
    samples.createApiKey.push(await graphql(port, key, query, { name: `ordinary ${++written}` }, { agent: writeAgent, timeoutMs }));
    await sleep(options.graphqlPauseMs);
  });
  const uploadAgent = keepAlive();
  const uploads = options.uploads ? loop(async () => {
    const form = multipartFile(Buffer.from(`${JSON.stringify({ custom_id: `ordinary-${performance.now()}`, method: 'POST', url: '/v1/chat/completions', body: { messages: [{ role: 'user', content: 'hi' }] } })}\n`), 'ordinary.jsonl');
    const answer = await call({ port, method: 'POST', path: `${options.basePath}/files`, headers: { ...bearer, 'content-type': form.contentType }, body: form.parts, agent: uploadAgent, timeoutMs });
    samples.upload.push(answer);
    await sleep(1_000);
  }) : Promise.resolve();

  return {
    samples,
    async stop() {
      stopped = true;
      if (probeTimer) clearTimeout(probeTimer);
      await Promise.all([chat, reads, writes, uploads, ...pending]);
      for (const agent of agents) agent.destroy();
    },
  };
}
