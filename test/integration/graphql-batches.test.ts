import OpenAI, { toFile } from 'openai';
import { graphqlClient } from '../capacity/support/graphql-client';
import { overWebSocket } from '../support/graphql-websocket';
import { startTestServer, waitFor, type TestServer, type TestWorkspace } from '../support/test-server';
import { leaked, subscribe, type LiveSubscription } from '../security/support/security-client';

const BATCH_FIELDS = `id deploymentId endpoint model status completionWindow inputFileId outputFileId errorFileId
  requestCounts { total completed failed } usage { inputTokens cachedTokens outputTokens totalTokens }
  errors { code message param line } metadata
  createdAt inProgressAt expiresAt finalizingAt completedAt failedAt expiredAt cancellingAt cancelledAt
  inputFileUrl outputFileUrl errorFileUrl`;
const BATCH = `query($id: ID!) { batch(id: $id) { ${BATCH_FIELDS} } }`;
const BATCHES = 'query($deploymentId: ID, $after: ID, $limit: Int) { batches(deploymentId: $deploymentId, after: $after, limit: $limit) { id status } }';
const CANCEL = 'mutation($id: ID!) { cancelBatch(id: $id) { id status cancellingAt } }';
const UPDATED = 'subscription($deploymentId: ID) { batchUpdated(deploymentId: $deploymentId) { id deploymentId status requestCounts { total completed failed } outputFileId errorFileId } }';

interface Line { custom_id: string; method: 'POST'; url: string; body: Record<string, unknown> }
interface BatchEvent { batchUpdated: { id: string; deploymentId: string; status: string; requestCounts: { total: number; completed: number; failed: number } } }

/** Where an error gives away the server's insides: a stack frame, a path of this checkout or of node_modules. */
function internals(text: string): string[] {
  return [process.cwd(), 'node_modules', 'stacktrace', 'exception'].filter((needle) => text.includes(needle))
    .concat(/\.[cm]?[jt]sx?:\d+/.test(text) || /\n\s*at /.test(text) ? ['a stack frame'] : []);
}

/**
 * The GraphQL side of the OpenAI Batch API: batches created through a deployment endpoint with
 * the official SDK are listed, read, followed live and cancelled over GraphQL, their files
 * downloaded through signed links without the key, and nothing of them reaches another workspace.
 */
describe('GraphQL: batches', () => {
  let test: TestServer;
  let mine: TestWorkspace;
  let theirs: TestWorkspace;
  let deployment: { id: string; slug: string; baseUrl: string };
  let model: string;
  let client: OpenAI;
  let asMine: ReturnType<typeof graphqlClient>;
  let asTheirs: ReturnType<typeof graphqlClient>;
  let finished: { id: string; inputFileId: string };
  const live: LiveSubscription[] = [];

  const chatLine = (customId: string, body: Record<string, unknown> = {}): Line => ({
    custom_id: customId, method: 'POST', url: '/v1/chat/completions',
    body: { model, messages: [{ role: 'user', content: `say something about ${customId}` }], max_tokens: 4, ...body },
  });

  const createBatch = async (lines: Line[], metadata?: Record<string, string>) => {
    const jsonl = `${lines.map((line) => JSON.stringify(line)).join('\n')}\n`;
    const file = await client.files.create({ file: await toFile(Buffer.from(jsonl), 'input.jsonl'), purpose: 'batch' });
    const batch = await client.batches.create({ input_file_id: file.id, endpoint: '/v1/chat/completions', completion_window: '24h', metadata });
    return { batch, file, jsonl };
  };

  const statusOf = async (id: string) => (await asMine(BATCH, { id })).data?.batch.status as string;
  const waitForStatus = async (id: string, statuses: string[], timeoutMs = 30_000) => {
    await waitFor(async () => statuses.includes(await statusOf(id)), timeoutMs, `batch ${id} to be ${statuses.join(' or ')}`);
  };
  const open = (workspace: TestWorkspace, variables: Record<string, unknown> = {}) => {
    const subscription = subscribe(test.url, `Bearer ${workspace.apiKey}`, UPDATED, variables);
    live.push(subscription);
    return subscription;
  };

  beforeAll(async () => {
    // Per-line engine timing (`cpu_engine` in a line's body) makes a batch slow enough to cancel mid-way.
    test = await startTestServer({ controlPlane: { localAgentEnv: { WORKER_CPU_TEST_CONTROLS: 'true' } } });
    mine = await test.createWorkspace();
    theirs = await test.createWorkspace();
    deployment = await test.createDeployment(mine);
    model = test.server.controlPlane.catalog.defaultChatModel().id;
    client = new OpenAI({ baseURL: deployment.baseUrl, apiKey: mine.apiKey, maxRetries: 0 });
    asMine = graphqlClient(test.url, mine.apiKey);
    asTheirs = graphqlClient(test.url, theirs.apiKey);
    await test.waitForReplicas(deployment.id, 1);
  });

  afterEach(() => {
    for (const subscription of live.splice(0)) subscription.stop();
  });

  afterAll(async () => {
    await test?.stop();
  });

  it('follows a batch live from creation to completed, reads it as REST does, and its links download its files without the key', async () => {
    const following = open(mine, { deploymentId: deployment.id });
    const everything = open(mine);
    const spying = open(theirs);
    await Promise.all(live.map((subscription) => subscription.ready));

    const lines = [chatLine('first'), chatLine('second'), chatLine('third'), chatLine('refused', { max_tokens: -1 })];
    const { batch: created, file, jsonl } = await createBatch(lines, { purpose: 'graphql test' });
    finished = { id: created.id, inputFileId: file.id };
    await waitFor(() => following.events.some((event) => (event as BatchEvent).batchUpdated.status === 'completed'), 30_000, 'the completed event');

    // Every event is this batch's, in order: statuses only move forward and counts only grow.
    const events = following.events.map((event) => (event as BatchEvent).batchUpdated);
    expect(events.every((event) => event.id === created.id && event.deploymentId === deployment.id)).toBe(true);
    const order = ['validating', 'in_progress', 'finalizing', 'completed'];
    const positions = events.map((event) => order.indexOf(event.status));
    expect(positions.every((position, index) => position >= 0 && (index === 0 || position >= positions[index - 1]))).toBe(true);
    const done = events.map((event) => event.requestCounts.completed + event.requestCounts.failed);
    expect(done.every((count, index) => index === 0 || count >= done[index - 1])).toBe(true);
    expect(events.at(-1)!.requestCounts).toEqual({ total: 4, completed: 3, failed: 1 });
    await waitFor(() => everything.events.length >= following.events.length, 5_000, 'the unfiltered subscription to catch up');

    const { data, errors } = await asMine(BATCH, { id: created.id });
    expect(errors).toBeUndefined();
    const batch = data.batch;
    const rest = await client.batches.retrieve(created.id);
    expect(batch).toMatchObject({
      id: rest.id, deploymentId: deployment.id, endpoint: '/v1/chat/completions', model, status: 'completed', completionWindow: '24h',
      inputFileId: file.id, outputFileId: rest.output_file_id, errorFileId: rest.error_file_id,
      requestCounts: rest.request_counts, errors: null, metadata: { purpose: 'graphql test' },
      failedAt: null, expiredAt: null, cancellingAt: null, cancelledAt: null,
    });
    expect(batch.usage.totalTokens).toBeGreaterThan(0);
    expect(batch.usage.totalTokens).toBe(batch.usage.inputTokens + batch.usage.outputTokens);
    for (const [field, seconds] of [['createdAt', rest.created_at], ['inProgressAt', rest.in_progress_at], ['finalizingAt', rest.finalizing_at], ['completedAt', rest.completed_at], ['expiresAt', rest.expires_at]] as const) {
      expect({ field, seconds: Math.floor(Date.parse(batch[field]) / 1000) }).toEqual({ field, seconds });
    }

    // The links carry their own authorization: fetched with no key at all.
    const download = async (url: string) => {
      const response = await fetch(url);
      expect(response.status).toBe(200);
      return await response.text();
    };
    expect(await download(batch.inputFileUrl)).toBe(jsonl);
    const output = await download(batch.outputFileUrl);
    expect(output).toBe(await (await client.files.content(batch.outputFileId)).text());
    expect(output.trim().split('\n').map((line) => JSON.parse(line).custom_id).sort()).toEqual(['first', 'second', 'third']);
    const errorLines = (await download(batch.errorFileUrl)).trim().split('\n').map((line) => JSON.parse(line));
    expect(errorLines.map((line) => [line.custom_id, line.response.status_code])).toEqual([['refused', 400]]);
    // A tampered link is refused.
    expect((await fetch(batch.outputFileUrl.replace(/signature=[0-9a-f]/, (match: string) => `${match.slice(0, -1)}${match.endsWith('0') ? '1' : '0'}`))).status).toBe(403);

    expect(spying.events).toEqual([]);
    expect(spying.errors).toEqual([]);
  });

  it('lists batches newest first, of the workspace or of one deployment, a page at a time', async () => {
    const { batch: second } = await createBatch([chatLine('again')]);
    await waitForStatus(second.id, ['completed']);
    const ids = (answer: { data?: any }) => answer.data?.batches.map((batch: { id: string }) => batch.id);
    expect(ids(await asMine(BATCHES, {}))).toEqual([second.id, finished.id]);
    expect(ids(await asMine(BATCHES, { deploymentId: deployment.id }))).toEqual([second.id, finished.id]);
    expect(ids(await asMine(BATCHES, { limit: 1 }))).toEqual([second.id]);
    expect(ids(await asMine(BATCHES, { after: second.id, limit: 1 }))).toEqual([finished.id]);
    expect(ids(await asMine(BATCHES, { after: finished.id }))).toEqual([]);
    // The REST list agrees.
    expect((await client.batches.list()).data.map((batch) => batch.id)).toEqual([second.id, finished.id]);
  });

  it('cancels a running batch: no line starts after, the rest go to the error file; an ended batch is CONFLICT', async () => {
    // Each line holds its slot for a while, so most lines are still waiting when the cancel lands.
    const lines = Array.from({ length: 8 }, (_, index) => chatLine(`slow-${index}`, { cpu_engine: { ttft_ms: 1_500 } }));
    const { batch } = await createBatch(lines);
    await waitForStatus(batch.id, ['in_progress']);

    const cancelled = await asMine(CANCEL, { id: batch.id });
    expect(cancelled.errors).toBeUndefined();
    expect(cancelled.data.cancelBatch).toMatchObject({ id: batch.id, status: expect.stringMatching(/^cancell(ing|ed)$/), cancellingAt: expect.any(String) });
    // Asking again while it winds down answers the batch as it is.
    expect((await asMine(CANCEL, { id: batch.id })).data.cancelBatch.status).toMatch(/^cancell(ing|ed)$/);
    await waitForStatus(batch.id, ['cancelled']);
    const { data } = await asMine(BATCH, { id: batch.id });
    expect(data.batch.requestCounts.total).toBe(8);
    expect(data.batch.requestCounts.failed).toBeGreaterThan(0);
    expect(data.batch.requestCounts.completed + data.batch.requestCounts.failed).toBe(8);
    const errorFile = await (await fetch(data.batch.errorFileUrl)).text();
    expect(errorFile).toContain('batch_cancelled');

    const conflict = await asMine(CANCEL, { id: finished.id });
    expect(conflict.data ?? null).toBeNull();
    expect(conflict.errors?.[0]).toMatchObject({ extensions: { code: 'CONFLICT', param: 'id' }, message: expect.stringContaining('completed') });
    expect(await statusOf(finished.id)).toBe('completed');
  });

  it('another workspace sees none of it: its reads and cancel are NOT_FOUND, its lists empty, the deployment FORBIDDEN, its subscription refused', async () => {
    const mineNow = (await asMine(BATCH, { id: finished.id })).data.batch;
    const refusals = [
      ['batch', BATCH, { id: finished.id }, 'NOT_FOUND', 'id'],
      ['cancelBatch', CANCEL, { id: finished.id }, 'NOT_FOUND', 'id'],
      ['batches(deploymentId)', BATCHES, { deploymentId: deployment.id }, 'FORBIDDEN', 'deploymentId'],
    ] as const;
    const secrets = [mineNow.inputFileId, mineNow.outputFileId, mineNow.errorFileId, mine.workspaceId];
    const outcomes = [];
    for (const [label, query, variables] of refusals) {
      const answer = await asTheirs(query, variables);
      outcomes.push({ label, data: answer.data ?? null, error: answer.errors?.[0]?.extensions, leaked: leaked(JSON.stringify(answer), secrets) });
    }
    expect(outcomes).toEqual(refusals.map(([label, , , code, param]) => ({ label, data: null, error: { code, param }, leaked: [] })));
    expect(await asTheirs(BATCHES, {})).toEqual({ data: { batches: [] } });
    // The `after` cursor of another workspace's list is not one of this list's.
    expect((await asTheirs(BATCHES, { after: finished.id })).errors?.[0].extensions).toEqual({ code: 'BAD_USER_INPUT', param: 'after' });

    const refused = await overWebSocket(test.url, `Bearer ${theirs.apiKey}`, { query: UPDATED, variables: { deploymentId: deployment.id } });
    // Refused when subscribing: the operation's one result is the error (then it completes), as for a query.
    expect(refused.messages).toEqual([{ type: 'next', payload: { errors: [expect.objectContaining({ extensions: { code: 'FORBIDDEN', param: 'deploymentId' } })] } }]);

    // Unchanged for its owner.
    expect((await asMine(BATCH, { id: finished.id })).data.batch).toEqual(expect.objectContaining({ status: 'completed', requestCounts: mineNow.requestCounts }));
  });

  it('bad input answers a GraphQL error naming the argument, without internals', async () => {
    const cases: Array<[string, string, Record<string, unknown>, string, string]> = [
      ['unknown batch id', BATCH, { id: 'batch_000000000000000000000000' }, 'NOT_FOUND', 'id'],
      ['malformed batch id', BATCH, { id: 'not-a-batch' }, 'NOT_FOUND', 'id'],
      ['a file id as batch id', BATCH, { id: finished.inputFileId }, 'NOT_FOUND', 'id'],
      ['a 10 000-character id', BATCH, { id: `batch_${'f'.repeat(10_000)}` }, 'NOT_FOUND', 'id'],
      ['cancel of an unknown id', CANCEL, { id: 'batch_ffffffffffffffffffffffff' }, 'NOT_FOUND', 'id'],
      ['limit 0', BATCHES, { limit: 0 }, 'BAD_USER_INPUT', 'limit'],
      ['limit 101', BATCHES, { limit: 101 }, 'BAD_USER_INPUT', 'limit'],
      ['after an unknown batch', BATCHES, { after: 'batch_000000000000000000000000' }, 'BAD_USER_INPUT', 'after'],
      ['after garbage', BATCHES, { after: '../../etc/passwd' }, 'BAD_USER_INPUT', 'after'],
      ['unknown deployment', BATCHES, { deploymentId: 'dep_nope' }, 'NOT_FOUND', 'deploymentId'],
    ];
    const outcomes = [];
    for (const [label, query, variables] of cases) {
      const answer = await asMine(query, variables);
      const text = JSON.stringify(answer);
      outcomes.push({ label, data: answer.data ?? null, error: answer.errors?.[0]?.extensions, short: (answer.errors?.[0]?.message.length ?? 0) < 400, internals: internals(text) });
    }
    expect(outcomes).toEqual(cases.map(([label, , , code, param]) => ({ label, data: null, error: { code, param }, short: true, internals: [] })));

    const unknownDeployment = await overWebSocket(test.url, `Bearer ${mine.apiKey}`, { query: UPDATED, variables: { deploymentId: 'dep_nope' } });
    expect(unknownDeployment.messages).toEqual([{ type: 'next', payload: { errors: [expect.objectContaining({ extensions: { code: 'NOT_FOUND', param: 'deploymentId' } })] } }]);
    expect(internals(JSON.stringify(unknownDeployment))).toEqual([]);
    const noKey = await graphqlClient(test.url, 'mk-wrong')(BATCHES, {});
    expect(noKey.errors?.[0].extensions.code).toBe('UNAUTHENTICATED');
  });
});
