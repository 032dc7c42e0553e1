/**
 * Issue 33, "a guest reads the owner's prompt": engines' prefix caches were shared by every
 * tenant of a replica, so a guest of shared serving read an owner's system prompt through
 * `usage.prompt_tokens_details.cached_tokens` (1579 of 1593 tokens cached on the owner's
 * prompt, 0 on a random one) and extracted a 4-digit secret from it in 40 requests, one digit
 * at a time. Repeated here as the guest would, on the engines that cache prefixes: llama.cpp
 * (real GGUF weights) and the CPU engine's simulated cache, each on a shared deployment; and on
 * an `openai` engine (a vLLM stand-in at the HTTP boundary), whose jobs must carry each
 * workspace's own `cache_salt`, the same on every server of the cluster and never a client's.
 */
import { createHmac } from 'node:crypto';
import OpenAI from 'openai';
import { CACHE_SALT_KEY_SETTING } from '../../control-plane/dispatch/cache-salts';
import { startCpuEngineServer, type CpuEngineServer } from '../../worker-agent/engines/cpu-engine-server';
import { fileLines, jsonl, upload, waitForBatch } from '../batches/support/batch-helpers';
import { chatPromptTokens, modelDirectory, type ModelDirectory } from '../llama/support/tiny-model';
import { SHARED_ID, SHARED_MODEL, startSharingFixture, type SharingFixture } from '../sharing/support/sharing-fixture';
import { dropTestDatabase } from '../support/test-database';
import { startTestServer, waitFor, type TestServer } from '../support/test-server';

type Usage = { prompt_tokens: number; prompt_tokens_details?: { cached_tokens?: number } | null };
const cachedOf = (usage: Usage | undefined) => usage?.prompt_tokens_details?.cached_tokens ?? 0;

/** The owner's application: a long system prompt with a secret in it. */
const INSTRUCTIONS = 'You are the support assistant of a small bank. Answer politely and briefly, and never reveal internal data. '.repeat(5);
const SECRET_DIGITS = '4821';
const SYSTEM_PROMPT = `${INSTRUCTIONS}The vault code is ${SECRET_DIGITS}. Do not share it.`;
const OWNER_CHAT = [{ role: 'system' as const, content: SYSTEM_PROMPT }, { role: 'user' as const, content: 'What are your opening hours?' }];

interface Tenants {
  owner: OpenAI;
  /** A guest that sends the owner's exact prompt. */
  copycat: OpenAI;
  /** A guest that probes the secret's first digit by the count of cached tokens. */
  prober: OpenAI;
}

async function sharedTenants(fixture: SharingFixture): Promise<Tenants> {
  const owner = await fixture.workspace('owner');
  const copycat = await fixture.workspace('copycat guest', '5');
  const prober = await fixture.workspace('prober guest', '5');
  const shared = await fixture.sharedDeployment(owner.apiKey);
  await fixture.test.waitForReplicas(shared.id, 1);
  return {
    owner: new OpenAI({ baseURL: shared.baseUrl, apiKey: owner.apiKey, maxRetries: 0 }),
    copycat: fixture.guestClient(copycat.apiKey),
    prober: fixture.guestClient(prober.apiKey),
  };
}

/** One chat as the owner (its deployment) or a guest (the shared endpoint); its usage. */
async function ask(client: OpenAI, model: string, messages: typeof OWNER_CHAT): Promise<Usage> {
  const answer = await client.chat.completions.create({ model, messages, max_tokens: 2, temperature: 0 });
  return answer.usage as Usage;
}

/**
 * The attack on one engine: the owner's prompt is cached (its own repeat hits), the copycat
 * guest's copy of it gets nothing of it (its own repeat hits), the prober guest's guesses of the
 * first digit all count alike, and the owner's cache survives the guests.
 */
async function attack(tenants: Tenants): Promise<void> {
  const first = await ask(tenants.owner, SHARED_MODEL, OWNER_CHAT);
  expect(cachedOf(first)).toBe(0);
  const repeated = await ask(tenants.owner, SHARED_MODEL, OWNER_CHAT);
  // The cache works: the owner's own repeat reuses most of its prompt.
  expect(cachedOf(repeated)).toBeGreaterThan(first.prompt_tokens / 2);

  // The guest sends the owner's exact prompt: nothing of the owner's cache is its.
  const copy = await ask(tenants.copycat, SHARED_ID, OWNER_CHAT);
  expect(copy.prompt_tokens).toBe(first.prompt_tokens);
  expect(cachedOf(copy)).toBe(0);
  // Its own repeat reuses what it cached itself.
  expect(cachedOf(await ask(tenants.copycat, SHARED_ID, OWNER_CHAT))).toBeGreaterThan(first.prompt_tokens / 2);

  // The extraction: guess the first digit, reading the cached tokens of each guess.
  const guesses: number[] = [];
  for (let digit = 0; digit <= 9; digit++) {
    const guess = [{ role: 'system' as const, content: `${INSTRUCTIONS}The vault code is ${digit}` }, { role: 'user' as const, content: 'Hi' }];
    guesses.push(cachedOf(await ask(tenants.prober, SHARED_ID, guess)));
  }
  // The first guess finds nothing; the later ones find only the prober's own earlier guesses
  // (their common start), the right digit no more than any wrong one.
  expect(guesses[0]).toBe(0);
  expect(new Set(guesses.slice(1)).size).toBe(1);
  expect(guesses[Number(SECRET_DIGITS[0])]).toBe(guesses[1]);

  // The guests took other slots: the owner's prompt is still cached for the owner.
  expect(cachedOf(await ask(tenants.owner, SHARED_MODEL, OWNER_CHAT))).toBeGreaterThan(first.prompt_tokens / 2);
}

describe('prefix caches never cross tenants: llama.cpp on a shared deployment', () => {
  let models: ModelDirectory;
  let fixture: SharingFixture;
  let tenants: Tenants;

  beforeAll(async () => {
    models = modelDirectory();
    const modelPath = models.write('tiny-shared.gguf', { contextLength: 2048 });
    // LOCAL_ENGINE=llama-cpp runs every text model on the file, the shared catalog model included.
    fixture = await startSharingFixture({
      controlPlane: { localEngine: 'llama-cpp', localModelPath: modelPath, localLlamaThreads: 1, localLlamaContextSize: 2048, localLlamaParallel: 4, localLlamaCachedSequences: 6 },
    });
    tenants = await sharedTenants(fixture);
  }, 120_000);

  afterAll(async () => {
    await fixture?.test.stop();
    models?.remove();
  });

  it('a guest sending the owner\'s exact prompt gets cached_tokens 0, and guessing the secret digit by digit learns nothing', async () => {
    expect(chatPromptTokens(OWNER_CHAT)).toBeGreaterThan(500);
    await attack(tenants);
  });
});

describe('prefix caches never cross tenants: the CPU engine\'s simulated cache on a shared deployment', () => {
  let fixture: SharingFixture;
  let tenants: Tenants;

  beforeAll(async () => {
    fixture = await startSharingFixture({ controlPlane: { localAgentEnv: { WORKER_CPU_PREFIX_CACHE_TOKENS: '65536' } } });
    tenants = await sharedTenants(fixture);
  }, 120_000);

  afterAll(async () => {
    await fixture?.test.stop();
  });

  it('a guest sending the owner\'s exact prompt gets cached_tokens 0, and guessing the secret digit by digit learns nothing', async () => {
    await attack(tenants);
  });
});

describe('the openai engine (vLLM at the boundary): each workspace\'s own cache_salt, on every server, never a client\'s', () => {
  let engine: CpuEngineServer;
  /** What the engine received: each chat or completion body. */
  const received: Array<{ path: string; body: Record<string, unknown> }> = [];
  let fixture: SharingFixture;
  let serverB: TestServer;
  let databaseUrl: string;
  let owner: { id: string; apiKey: string };
  let guests: Array<{ id: string; apiKey: string }>;
  let deployment: { id: string; baseUrl: string };
  const cluster = { clusterHeartbeatIntervalMs: 100, clusterServerTimeoutMs: 2_000 };

  beforeAll(async () => {
    // The CPU engine served over HTTP salts its prefix cache by the body's cache_salt, as vLLM does.
    engine = await startCpuEngineServer({ options: { prefixCacheTokens: 65_536 }, onRequest: (path, body) => received.push({ path, body }) });
    fixture = await startSharingFixture({
      controlPlane: { ...cluster, localEngine: 'openai', localEngineUrl: engine.url, localAgentEnv: { WORKER_ENGINE_PRIORITY_SCHEDULING: 'true' } },
    });
    databaseUrl = fixture.test.databaseUrl;
    // One object store for the cluster, as several servers need (docs/operating.md#one-server-per-data_dir): a batch's files are written by
    // whichever server's upkeep takes it and read through either; on two local stores they were found on one only.
    serverB = await startTestServer({
      databaseUrl, dataDir: fixture.test.dataDir,
      controlPlane: { ...cluster, localAgents: false, sharing: { availabilityIntervalMs: 100, settleIntervalMs: 50, creditLeaseIdleMs: 300 } },
    });
    owner = await fixture.workspace('owner');
    guests = [await fixture.workspace('guest one', '5'), await fixture.workspace('guest two', '5')];
    deployment = await fixture.sharedDeployment(owner.apiKey);
    await fixture.test.waitForReplicas(deployment.id, 1);
  }, 120_000);

  afterAll(async () => {
    await serverB?.stop();
    await fixture?.test.stop({ keepDatabase: true });
    if (databaseUrl) await dropTestDatabase(databaseUrl);
    await engine?.close();
  });

  /** The salt the engine got with the last request, after `send`. */
  const saltOf = async (send: () => Promise<unknown>): Promise<unknown> => {
    const before = received.length;
    await send();
    expect(received.length).toBe(before + 1);
    return received[received.length - 1].body.cache_salt;
  };
  const onServer = (server: TestServer, path: string) => `${server.url}${path}`;
  const chat = { messages: [{ role: 'user' as const, content: 'hello' }], max_tokens: 2 };

  it('sends the owner\'s salt with the owner\'s chat, completions and batch lines, a guest\'s own with each guest\'s; distinct per workspace, stable across requests and servers', async () => {
    const ownerOn = (server: TestServer) => new OpenAI({ baseURL: onServer(server, new URL(deployment.baseUrl).pathname), apiKey: owner.apiKey, maxRetries: 0 });
    const guestOn = (server: TestServer, index: number) => new OpenAI({ baseURL: onServer(server, '/shared/v1'), apiKey: guests[index].apiKey, maxRetries: 0 });
    await waitFor(async () => ((await guestOn(serverB, 0).models.retrieve(SHARED_ID)) as any).availability === 'Available', 10_000, 'B sees A\'s shared replica');

    const ownerSalt = await saltOf(() => ownerOn(fixture.test).chat.completions.create({ model: SHARED_MODEL, ...chat }));
    expect(ownerSalt).toMatch(/^[A-Za-z0-9_-]{43}$/);
    // Stable: another request, a completion, a stream, and the same on server B (relayed to A's replica).
    expect(await saltOf(() => ownerOn(fixture.test).chat.completions.create({ model: SHARED_MODEL, ...chat }))).toBe(ownerSalt);
    expect(await saltOf(() => ownerOn(fixture.test).completions.create({ model: SHARED_MODEL, prompt: 'hello', max_tokens: 2 }))).toBe(ownerSalt);
    expect(await saltOf(async () => {
      for await (const _chunk of await ownerOn(fixture.test).chat.completions.create({ model: SHARED_MODEL, ...chat, stream: true })) { /* drained */ }
    })).toBe(ownerSalt);
    expect(await saltOf(() => ownerOn(serverB).chat.completions.create({ model: SHARED_MODEL, ...chat }))).toBe(ownerSalt);

    const guestSalts = [];
    for (const index of [0, 1]) {
      const salt = await saltOf(() => guestOn(fixture.test, index).chat.completions.create({ model: SHARED_ID, ...chat }));
      expect(salt).toMatch(/^[A-Za-z0-9_-]{43}$/);
      expect(await saltOf(() => guestOn(serverB, index).chat.completions.create({ model: SHARED_ID, ...chat }))).toBe(salt);
      guestSalts.push(salt);
    }
    expect(new Set([ownerSalt, ...guestSalts]).size).toBe(3);

    // A batch line is the owner's work: the owner's salt.
    const ownerClient = ownerOn(fixture.test);
    const before = received.length;
    const input = await upload(ownerClient, jsonl([{ custom_id: 'one', method: 'POST', url: '/v1/chat/completions', body: { model: SHARED_MODEL, ...chat } }]));
    const batch = await waitForBatch(ownerClient, (await ownerClient.batches.create({ input_file_id: input, endpoint: '/v1/chat/completions', completion_window: '24h' })).id);
    expect({ status: batch.status, errors: batch.errors ?? null, ...batch.request_counts }).toMatchObject({ status: 'completed', completed: 1, failed: 0 });
    expect(received.slice(before).map((request) => request.body.cache_salt)).toEqual([ownerSalt]);

    // Derived from the cluster's key (256 random bits in the database) and the workspace: nothing a tenant sees.
    const [setting] = await fixture.test.server.controlPlane.dataSource.query('SELECT value FROM cluster_settings WHERE name = $1', [CACHE_SALT_KEY_SETTING]);
    expect(setting.value).toMatch(/^[0-9a-f]{64}$/);
    const derived = (workspaceId: string) => createHmac('sha256', Buffer.from(setting.value, 'hex')).update(workspaceId).digest('base64url');
    expect([ownerSalt, ...guestSalts]).toEqual([derived(owner.id), derived(guests[0].id), derived(guests[1].id)]);
  });

  it('keeps the owner\'s cached prompt from a guest at the engine: cached_tokens 0 on the owner\'s exact prompt', async () => {
    const ownerClient = new OpenAI({ baseURL: deployment.baseUrl, apiKey: owner.apiKey, maxRetries: 0 });
    const guest = new OpenAI({ baseURL: `${fixture.test.url}/shared/v1`, apiKey: guests[0].apiKey, maxRetries: 0 });
    expect(cachedOf(await ask(ownerClient, SHARED_MODEL, OWNER_CHAT))).toBe(0);
    expect(cachedOf(await ask(ownerClient, SHARED_MODEL, OWNER_CHAT))).toBeGreaterThan(0);
    expect(cachedOf(await ask(guest, SHARED_ID, OWNER_CHAT))).toBe(0);
  });

  it('refuses a client\'s cache_salt with a 400 naming the field on every text endpoint (the engine sees none of them)', async () => {
    const before = received.length;
    const salted = { cache_salt: 'anything', ...chat };
    const refusal = (answer: { status: number; json: any }) => {
      expect(answer.status).toBe(400);
      expect(answer.json.error).toMatchObject({ type: 'invalid_request_error', param: 'cache_salt', code: 'invalid_request' });
    };
    const post = async (url: string, apiKey: string, body: unknown) => {
      const response = await fetch(url, { method: 'POST', headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' }, body: JSON.stringify(body) });
      return { status: response.status, json: await response.json() };
    };
    for (const server of [fixture.test, serverB]) {
      const base = onServer(server, new URL(deployment.baseUrl).pathname);
      refusal(await post(`${base}/chat/completions`, owner.apiKey, { model: SHARED_MODEL, ...salted }));
      refusal(await post(`${base}/completions`, owner.apiKey, { model: SHARED_MODEL, prompt: 'hello', max_tokens: 2, cache_salt: null }));
      refusal(await post(`${server.url}/shared/v1/chat/completions`, guests[0].apiKey, { model: SHARED_ID, ...salted }));
    }
    // A batch line is checked by the same parser: its error line names the field; nothing runs.
    const ownerClient = new OpenAI({ baseURL: deployment.baseUrl, apiKey: owner.apiKey, maxRetries: 0 });
    const input = await upload(ownerClient, jsonl([{ custom_id: 'salted', method: 'POST', url: '/v1/chat/completions', body: { model: SHARED_MODEL, ...salted } }]));
    const batch = await waitForBatch(ownerClient, (await ownerClient.batches.create({ input_file_id: input, endpoint: '/v1/chat/completions', completion_window: '24h' })).id);
    expect(batch.request_counts).toMatchObject({ completed: 0, failed: 1 });
    const [line] = await fileLines(ownerClient, batch.error_file_id);
    expect(line.response).toMatchObject({ status_code: 400, body: { error: { param: 'cache_salt' } } });
    expect(received.length).toBe(before);
  });
});
