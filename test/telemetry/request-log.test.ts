import OpenAI from 'openai';
import { waitFor } from '../support/test-server';
import { SHARED_ID, SHARED_MODEL, startSharingFixture, type SharingFixture } from '../sharing/support/sharing-fixture';
import { chatLine, jsonl, upload, waitForBatch } from '../batches/support/batch-helpers';

const ENTRY = `id requestId startedAt apiKeyId apiKeyName deploymentId deploymentSlug sharedModel replicaId batchId model endpoint stream status
  errorCode finishReason promptTokens completionTokens cachedTokens latencyMs ttftMs traceId hasBody
  phases { admittedMs dispatchedMs startedMs firstTokenMs endedMs }`;
const PAGE = `query($filter: RequestLogFilter, $first: Int, $after: String) {
  requestLog(filter: $filter, first: $first, after: $after) { nextCursor entries { ${ENTRY} } } }`;

/**
 * The request log over real requests (the official SDK on a real server and agents, real
 * PostgreSQL), read over GraphQL: what an entry holds, filters and pages, workspace isolation,
 * bodies only when the workspace stores them, a guest's entries, and retention.
 */
describe('request log', () => {
  let fixture: SharingFixture;
  let owner: { id: string; apiKey: string };
  let other: { id: string; apiKey: string };
  let shared: { id: string; baseUrl: string };
  let client: OpenAI;

  beforeAll(async () => {
    fixture = await startSharingFixture({
      controlPlane: {
        requestLog: { flushIntervalMs: 20, bodyMaxBytes: 1024, sweepIntervalMs: 100 },
        batches: { pollIntervalMs: 100, sweepIntervalMs: 200, progressIntervalMs: 50 },
      },
    });
    owner = await fixture.workspace('owner');
    other = await fixture.workspace('other');
    shared = await fixture.sharedDeployment(owner.apiKey);
    client = new OpenAI({ baseURL: shared.baseUrl, apiKey: owner.apiKey, maxRetries: 0 });
  }, 60_000);

  afterAll(async () => {
    await fixture?.test.stop();
  });

  const page = async (apiKey: string, variables: Record<string, unknown> = {}) => fixture.graphql(PAGE, variables, apiKey);
  const flushed = () => fixture.test.server.controlPlane.requestLogRecorder.flush();
  /** Entries of `apiKey`'s workspace once `count` of them match `filter`. */
  const entriesOnce = async (apiKey: string, count: number, filter: Record<string, unknown> = {}) => {
    let entries: any[] = [];
    await waitFor(async () => {
      await flushed();
      entries = (await page(apiKey, { filter, first: 200 })).data.requestLog.entries;
      return entries.length >= count;
    }, 10_000, `${count} request log entries`);
    return entries;
  };

  it('logs each text call with its id, key, deployment, model, status, tokens, timings and finish reason, newest first', async () => {
    const answered = await client.chat.completions.create({ model: SHARED_MODEL, messages: [{ role: 'user', content: 'hello' }], max_tokens: 2 }).withResponse();
    const stream = await client.chat.completions.create({ model: SHARED_MODEL, messages: [{ role: 'user', content: 'stream' }], max_tokens: 3, stream: true });
    for await (const _chunk of stream) { /* read to the end */ }
    const failed = await client.chat.completions.create({
      model: SHARED_MODEL, messages: [{ role: 'user', content: 'fail' }], max_tokens: 4, cpu_engine: { fail_after_tokens: 1 },
    } as any).catch((error) => error);
    expect(failed.status).toBeGreaterThanOrEqual(500);
    const entries = await entriesOnce(owner.apiKey, 3);
    expect(entries).toHaveLength(3);
    const [failedEntry, streamed, first] = entries;
    const requestId = answered.response.headers.get('x-request-id');
    expect(first).toMatchObject({
      id: requestId, requestId, apiKeyName: expect.any(String), deploymentId: shared.id, deploymentSlug: expect.any(String), sharedModel: null,
      replicaId: expect.stringMatching(/^rep/), batchId: null, model: SHARED_MODEL, endpoint: 'chat.completions', stream: false, status: 'succeeded',
      errorCode: null, finishReason: 'length', completionTokens: 2, ttftMs: null, hasBody: false,
    });
    expect(first.promptTokens).toBeGreaterThan(0);
    expect(first.latencyMs).toBeGreaterThan(0);
    expect(streamed).toMatchObject({ stream: true, status: 'succeeded', completionTokens: 3 });
    // Stamped at the first chunk, in whole ms: never null on a stream, never past its latency.
    expect(streamed.ttftMs).toBeGreaterThanOrEqual(0);
    expect(streamed.ttftMs).toBeLessThanOrEqual(streamed.latencyMs);
    expect(failedEntry).toMatchObject({ status: 'failed', errorCode: expect.any(String), finishReason: null });
    expect(Date.parse(failedEntry.startedAt)).toBeGreaterThanOrEqual(Date.parse(streamed.startedAt));
  });

  it('filters by status, finish reason, key, deployment and model, finds by request id, and pages by cursor', async () => {
    const all = await entriesOnce(owner.apiKey, 3);
    const failed = (await page(owner.apiKey, { filter: { status: 'failed' } })).data.requestLog.entries;
    expect(failed.length).toBeGreaterThan(0);
    expect(failed.every((entry: any) => entry.status === 'failed')).toBe(true);
    expect((await page(owner.apiKey, { filter: { finishReason: 'length' } })).data.requestLog.entries.every((entry: any) => entry.finishReason === 'length')).toBe(true);
    expect((await page(owner.apiKey, { filter: { deploymentId: shared.id, model: SHARED_MODEL, apiKeyId: all[0].apiKeyId } })).data.requestLog.entries).toHaveLength(all.length);
    expect((await page(owner.apiKey, { filter: { deploymentId: 'dep_nothing' } })).data.requestLog.entries).toEqual([]);
    const found = (await page(owner.apiKey, { filter: { search: all[1].id } })).data.requestLog.entries;
    expect(found.map((entry: any) => entry.id)).toEqual([all[1].id]);

    const seen: string[] = [];
    let after: string | null = null;
    do {
      const result: any = (await page(owner.apiKey, { first: 2, after })).data.requestLog;
      seen.push(...result.entries.map((entry: any) => entry.id));
      after = result.nextCursor;
    } while (after);
    expect(seen).toEqual(all.map((entry) => entry.id));
  });

  it('refuses bad filters and pages with BAD_USER_INPUT naming the field', async () => {
    const codeOf = async (variables: Record<string, unknown>) => (await page(owner.apiKey, variables)).errors?.[0].extensions;
    expect(await codeOf({ first: 0 })).toEqual({ code: 'BAD_USER_INPUT', param: 'first' });
    expect(await codeOf({ first: 201 })).toEqual({ code: 'BAD_USER_INPUT', param: 'first' });
    expect(await codeOf({ after: 'not-a-cursor' })).toEqual({ code: 'BAD_USER_INPUT', param: 'after' });
    expect(await codeOf({ filter: { status: 'exploded' } })).toEqual({ code: 'BAD_USER_INPUT', param: 'status' });
    expect(await codeOf({ filter: { from: '2026-11-02T00:00:00Z', to: '2026-11-01T00:00:00Z' } })).toEqual({ code: 'BAD_USER_INPUT', param: 'to' });
  });

  it('is the workspace\'s own: another workspace sees none of its entries and finds none by id', async () => {
    const [entry] = await entriesOnce(owner.apiKey, 1);
    expect((await page(other.apiKey)).data.requestLog.entries).toEqual([]);
    expect((await page(other.apiKey, { filter: { search: entry.id } })).data.requestLog.entries).toEqual([]);
    const lookup = await fixture.graphql('query($id: ID!) { requestLogEntry(id: $id) { id } }', { id: entry.id }, other.apiKey);
    expect(lookup.errors?.[0].extensions.code).toBe('NOT_FOUND');
    const own = await fixture.graphql('query($id: ID!) { requestLogEntry(id: $id) { id } }', { id: entry.id }, owner.apiKey);
    expect(own.data.requestLogEntry.id).toBe(entry.id);
  });

  it('stores bodies only once the workspace turns storing on, cut to the cap and marked so', async () => {
    expect((await fixture.graphql('{ requestLogStoresBodies }', {}, owner.apiKey)).data.requestLogStoresBodies).toBe(false);
    const turned = await fixture.graphql('mutation { setRequestLogStoresBodies(store: true) }', {}, owner.apiKey);
    expect(turned.data.setRequestLogStoresBodies).toBe(true);
    const before = (await entriesOnce(owner.apiKey, 1)).length;
    const long = 'x'.repeat(2_000);
    const answered = await client.chat.completions.create({ model: SHARED_MODEL, messages: [{ role: 'user', content: 'short secret' }], max_tokens: 2 }).withResponse();
    await client.chat.completions.create({ model: SHARED_MODEL, messages: [{ role: 'user', content: long }], max_tokens: 2 });
    const entries = await entriesOnce(owner.apiKey, before + 2);
    const [longEntry, shortEntry] = entries;
    expect(shortEntry.id).toBe(answered.response.headers.get('x-request-id'));
    const bodyOf = async (id: string) => (await fixture.graphql(`query($id: ID!) { requestLogEntry(id: $id) { hasBody body { request requestTruncated response responseTruncated } } }`,
      { id }, owner.apiKey)).data.requestLogEntry;
    const short = await bodyOf(shortEntry.id);
    expect(short.hasBody).toBe(true);
    expect(short.body.request).toContain('short secret');
    expect(short.body.requestTruncated).toBe(false);
    expect(JSON.parse(short.body.response).choices[0].message.content).toBe(answered.data.choices[0].message.content);
    const cut = await bodyOf(longEntry.id);
    expect(cut.body.requestTruncated).toBe(true);
    expect(Buffer.byteLength(cut.body.request)).toBe(1024);
    // Entries written while storing was off keep no body.
    expect((await bodyOf(entries[entries.length - 1].id)).body).toBeNull();
    await fixture.graphql('mutation { setRequestLogStoresBodies(store: false) }', {}, owner.apiKey);
  });

  it('a guest sees its own requests named by the shared model, never the owner\'s deployment or replica; the owner\'s log holds none of them', async () => {
    const guest = await fixture.workspace('guest', '1');
    expect((await fixture.graphql('mutation { setRequestLogStoresBodies(store: true) }', {}, guest.apiKey)).data.setRequestLogStoresBodies).toBe(true);
    await fixture.graphql('mutation { setRequestLogStoresBodies(store: true) }', {}, owner.apiKey);
    try {
      const guestClient = fixture.guestClient(guest.apiKey);
      await guestClient.chat.completions.create({ model: SHARED_ID, messages: [{ role: 'user', content: 'guest private words' }], max_tokens: 2 });
      const [entry] = await entriesOnce(guest.apiKey, 1);
      expect(entry).toMatchObject({ sharedModel: SHARED_ID, deploymentId: null, deploymentSlug: null, replicaId: null, status: 'succeeded', hasBody: true });
      const text = JSON.stringify((await fixture.graphql(`query($id: ID!) { requestLogEntry(id: $id) { ${ENTRY} body { request response } } }`, { id: entry.id }, guest.apiKey)).data);
      expect(text).toContain('guest private words');
      expect(text).not.toContain(shared.id);
      await flushed();
      const ownerEntries = (await page(owner.apiKey, { first: 200 })).data.requestLog.entries;
      expect(ownerEntries.some((ownerEntry: any) => ownerEntry.id === entry.id || ownerEntry.sharedModel)).toBe(false);
      const ownerBodies = await fixture.graphql(`{ requestLog(first: 200) { entries { body { request } } } }`, {}, owner.apiKey);
      expect(JSON.stringify(ownerBodies.data)).not.toContain('guest private words');
    } finally {
      await fixture.graphql('mutation { setRequestLogStoresBodies(store: false) }', {}, owner.apiKey);
    }
  });

  it('deletes entries past REQUEST_LOG_RETENTION_DAYS (30 by default) with their bodies', async () => {
    const [entry] = await entriesOnce(owner.apiKey, 1);
    const query = (sql: string, parameters: unknown[]) => fixture.test.server.controlPlane.dataSource.query(sql, parameters);
    await query(`UPDATE request_log SET started_at = now() - interval '31 days' WHERE workspace_id = $1 AND request_id = $2`, [owner.id, entry.id]);
    await waitFor(async () => (await query('SELECT count(*)::int AS n FROM request_log WHERE request_id = $1', [entry.id]))[0].n === 0, 10_000, 'the old entry swept');
    expect((await page(owner.apiKey, { filter: { search: entry.id } })).data.requestLog.entries).toEqual([]);
  });

  it('logs batch lines, marked with their batch, under log_<n> ids that find them', async () => {
    const lines = [chatLine('line-a', 'one'), chatLine('line-b', 'two')];
    const created = await client.batches.create({ input_file_id: await upload(client, jsonl(lines)), endpoint: '/v1/chat/completions', completion_window: '24h' });
    expect((await waitForBatch(client, created.id, 30_000)).status).toBe('completed');
    let lineEntries: any[] = [];
    await waitFor(async () => {
      await flushed();
      lineEntries = (await page(owner.apiKey, { first: 200 })).data.requestLog.entries.filter((entry: any) => entry.batchId === created.id);
      return lineEntries.length === 2;
    }, 10_000, 'both lines logged');
    for (const entry of lineEntries) {
      expect(entry).toMatchObject({ id: expect.stringMatching(/^log_\d+$/), requestId: null, deploymentId: shared.id, endpoint: 'chat.completions', status: 'succeeded', hasBody: false });
      const found = await fixture.graphql('query($id: ID!) { requestLogEntry(id: $id) { id batchId } }', { id: entry.id }, owner.apiKey);
      expect(found.data.requestLogEntry).toEqual({ id: entry.id, batchId: created.id });
    }
  }, 60_000);
});
