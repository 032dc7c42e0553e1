import { startReceiver } from '../webhooks/support/receiver';
import { startTestServer, waitFor, type TestServer, type TestWorkspace } from '../support/test-server';
import { call, graphqlAs, leaked, openAIError, sleep, subscribe, type GraphQLAnswer, type LiveSubscription } from './support/security-client';

const IMAGE_MODEL = 'black-forest-labs/FLUX.1-schnell';
const VIDEO_MODEL = 'Lightricks/LTX-Video';
const EMBEDDING_MODEL = 'BAAI/bge-large-en-v1.5';
const SECRET_PROMPT = 'victim-only prompt 5b1e';

type Endpoint = { id: string; slug: string; baseUrl: string };

/**
 * One workspace ("mine") against another ("victim") on one server: every way to name the
 * victim's records (REST paths, GraphQL ids, subscription arguments) is refused, reveals
 * nothing of them, and changes nothing; lists and subscriptions carry only the caller's own.
 */
describe('tenant isolation', () => {
  let test: TestServer;
  let receiver: Awaited<ReturnType<typeof startReceiver>>;
  let mine: TestWorkspace;
  let victim: TestWorkspace;
  let asMine: ReturnType<typeof graphqlAs>;
  let asVictim: ReturnType<typeof graphqlAs>;
  const ours = {} as { chat: Endpoint; image: Endpoint; queuedRequestId: string };
  const theirs = {} as {
    chat: Endpoint; image: Endpoint; video: Endpoint; embedding: Endpoint;
    requestId: string; spareRequestId: string; videoId: string;
    keyId: string; keyPlaintext: string; endpointId: string; endpointUrl: string; deliveryId: string; credentialId: number;
    batchId: string; batchFileId: string;
  };
  /** Everything of the victim's that must never appear in an answer to "mine" (ids sent in the request itself excepted). */
  let victimValues: string[];

  const bearer = (workspace: TestWorkspace) => `Bearer ${workspace.apiKey}`;
  const chatBody = { messages: [{ role: 'user', content: 'hi' }], max_tokens: 2 };
  const ok = (answer: GraphQLAnswer) => {
    expect(answer.body.errors).toBeUndefined();
    return answer.body.data;
  };

  beforeAll(async () => {
    receiver = await startReceiver();
    test = await startTestServer({ controlPlane: { webhooks: { allowInsecureLoopback: true, maxAttempts: 1, attemptTimeoutMs: 2_000 } } });
    mine = await test.createWorkspace();
    victim = await test.createWorkspace();
    asMine = graphqlAs(test.url, mine.apiKey);
    asVictim = graphqlAs(test.url, victim.apiKey);

    ours.chat = await test.createDeployment(mine);
    ours.image = await test.createDeployment(mine, { modelId: IMAGE_MODEL, provider: 'external' });
    theirs.chat = await test.createDeployment(victim);
    theirs.image = await test.createDeployment(victim, { modelId: IMAGE_MODEL, provider: 'external' });
    theirs.video = await test.createDeployment(victim, { modelId: VIDEO_MODEL, provider: 'external' });
    theirs.embedding = await test.createDeployment(victim, { modelId: EMBEDDING_MODEL, provider: 'external' });

    // Records of the victim's: queued for good (external deployments without agents run nothing).
    const submit = async (endpoint: Endpoint, path: string, body: unknown, as: TestWorkspace) => {
      const answer = await call('POST', `${endpoint.baseUrl}${path}`, bearer(as), body);
      expect({ path, status: answer.status, body: answer.status === 202 ? '' : answer.text }).toEqual({ path, status: 202, body: '' });
      return answer.json.id as string;
    };
    theirs.requestId = await submit(theirs.image, '/images/generations?async=true', { model: IMAGE_MODEL, prompt: SECRET_PROMPT, size: '512x512' }, victim);
    theirs.spareRequestId = await submit(theirs.image, '/images/generations?async=true', { model: IMAGE_MODEL, prompt: SECRET_PROMPT, size: '512x512' }, victim);
    theirs.videoId = await submit(theirs.video, '/videos/generations', { model: VIDEO_MODEL, prompt: SECRET_PROMPT, duration: 1 }, victim);
    ours.queuedRequestId = await submit(ours.image, '/images/generations?async=true', { model: IMAGE_MODEL, prompt: 'mine', size: '512x512' }, mine);

    const key = ok(await asVictim('mutation { createApiKey(input: {name: "victim second key", rpmLimit: 77}) { plaintext apiKey { id } } }')).createApiKey;
    theirs.keyId = key.apiKey.id;
    theirs.keyPlaintext = key.plaintext;
    theirs.endpointUrl = `${receiver.base}/ok/victim-endpoint`;
    theirs.endpointId = ok(await asVictim('mutation($url: String!) { createWebhookEndpoint(input: {url: $url, description: "victim hook"}) { id } }', { url: theirs.endpointUrl })).createWebhookEndpoint.id;
    theirs.deliveryId = ok(await asVictim('mutation($id: ID!) { sendTestWebhook(endpointId: $id) { id } }', { id: theirs.endpointId })).sendTestWebhook.id;
    theirs.credentialId = ok(await asVictim(`mutation($input: CreateStorageCredentialInput!) { createStorageCredential(input: $input) { id } }`, {
      input: { name: 'victim bucket', endpoint: 'https://52.216.8.10', region: 'us-east-1', bucket: 'victim-private-bucket', accessKeyId: 'AKIAVICTIMKEY9QWE', secretAccessKey: 'victim-secret-access-key-0123456789' },
    })).createStorageCredential.id;

    await test.waitForReplicas(ours.chat.id, 1);
    await test.waitForReplicas(theirs.chat.id, 1);
    expect((await call('POST', `${theirs.chat.baseUrl}/chat/completions`, bearer(victim), chatBody)).status).toBe(200);
    expect((await call('POST', `${ours.chat.baseUrl}/chat/completions`, bearer(mine), chatBody)).status).toBe(200);
    // A batch of the victim's, its input file uploaded as the openai SDK does (multipart, purpose "batch").
    const form = new FormData();
    form.append('purpose', 'batch');
    const line = { custom_id: 'victim-line', method: 'POST', url: '/v1/chat/completions', body: { model: test.server.controlPlane.catalog.defaultChatModel().id, ...chatBody } };
    form.append('file', new Blob([JSON.stringify(line)]), 'victim.jsonl');
    const uploaded = await fetch(`${theirs.chat.baseUrl}/files`, { method: 'POST', headers: { authorization: bearer(victim) }, body: form });
    expect(uploaded.status).toBe(200);
    theirs.batchFileId = ((await uploaded.json()) as { id: string }).id;
    const batch = await call('POST', `${theirs.chat.baseUrl}/batches`, bearer(victim), { input_file_id: theirs.batchFileId, endpoint: '/v1/chat/completions', completion_window: '24h' });
    expect(batch.status).toBe(200);
    theirs.batchId = batch.json.id as string;

    victimValues = [
      victim.workspaceId, victim.apiKey, victim.apiKeyId, theirs.keyId, theirs.keyPlaintext, theirs.chat.id, theirs.image.id, theirs.video.id,
      theirs.embedding.id, theirs.requestId, theirs.spareRequestId, theirs.videoId, theirs.endpointId, theirs.endpointUrl, theirs.deliveryId,
      SECRET_PROMPT, 'victim-private-bucket', 'victim bucket', 'victim hook', 'AKIAVICTIMKEY9QWE', 'victim-secret-access-key',
      theirs.batchId, theirs.batchFileId,
    ];
  }, 60_000);

  afterAll(async () => {
    await test?.stop();
    await receiver?.close();
  });

  describe('REST', () => {
    /** [what, method, endpoint of the victim's, path]: each answers as a deployment that does not exist. */
    const victimEndpointRoutes = (): Array<[string, string, Endpoint, string, unknown]> => [
      ['chat/completions (fast lane)', 'POST', theirs.chat, '/chat/completions', chatBody],
      ['chat/completions streamed', 'POST', theirs.chat, '/chat/completions', { ...chatBody, stream: true }],
      ['completions', 'POST', theirs.chat, '/completions', { prompt: 'hi', max_tokens: 2 }],
      ['models', 'GET', theirs.chat, '/models', undefined],
      ['models/{id}', 'GET', theirs.chat, `/models/${encodeURIComponent('meta-llama/Llama-3.1-8B-Instruct')}`, undefined],
      ['embeddings', 'POST', theirs.embedding, '/embeddings', { input: 'hi' }],
      ['images/generations', 'POST', theirs.image, '/images/generations?async=true', { model: IMAGE_MODEL, prompt: 'x', size: '512x512' }],
      ['requests', 'GET', theirs.image, '/requests', undefined],
      ['requests/{id}', 'GET', theirs.image, `/requests/${theirs.requestId}`, undefined],
      ['requests/{id}/cancel', 'POST', theirs.image, `/requests/${theirs.requestId}/cancel`, {}],
      ['videos (list)', 'GET', theirs.video, '/videos', undefined],
      ['videos (create)', 'POST', theirs.video, '/videos', { model: VIDEO_MODEL, prompt: 'x', seconds: '1' }],
      ['videos/generations', 'POST', theirs.video, '/videos/generations', { model: VIDEO_MODEL, prompt: 'x', duration: 1 }],
      ['videos/{id}', 'GET', theirs.video, `/videos/${theirs.videoId}`, undefined],
      ['videos/{id}/content', 'GET', theirs.video, `/videos/${theirs.videoId}/content`, undefined],
      ['videos/{id}/cancel', 'POST', theirs.video, `/videos/${theirs.videoId}/cancel`, {}],
    ];

    it('another workspace\'s deployment endpoint answers 404 deployment_not_found on every route, exactly like a slug that does not exist', async () => {
      const outcomes = [];
      for (const [what, method, endpoint, path, body] of victimEndpointRoutes()) {
        const answer = await call(method, `${endpoint.baseUrl}${path}`, bearer(mine), body);
        const unknown = await call(method, `${test.url}/d/no-such-deployment-0000/v1${path}`, bearer(mine), body);
        outcomes.push({
          what, error: openAIError(answer),
          sameAsUnknown: answer.json?.error?.message.replace(endpoint.slug, '<slug>') === unknown.json?.error?.message.replace('no-such-deployment-0000', '<slug>'),
          leaked: leaked(answer.text, victimValues.filter((value) => !path.includes(value))),
        });
      }
      expect(outcomes).toEqual(victimEndpointRoutes().map(([what]) => ({
        what, error: { status: 404, type: 'invalid_request_error', code: 'deployment_not_found', param: null }, sameAsUnknown: true, leaked: [],
      })));
    });

    it('another workspace\'s request and video ids through my own endpoint answer 403 permission_denied and change nothing', async () => {
      const cases: Array<[string, string, string]> = [
        ['GET requests/{id}', 'GET', `/requests/${theirs.requestId}`],
        ['POST requests/{id}/cancel', 'POST', `/requests/${theirs.requestId}/cancel`],
        ['GET videos/{id}', 'GET', `/videos/${theirs.videoId}`],
        ['GET videos/{id}/content', 'GET', `/videos/${theirs.videoId}/content`],
        ['POST videos/{id}/cancel', 'POST', `/videos/${theirs.videoId}/cancel`],
      ];
      const outcomes = [];
      for (const [what, method, path] of cases) {
        const answer = await call(method, `${ours.image.baseUrl}${path}`, bearer(mine), method === 'POST' ? {} : undefined);
        outcomes.push({ what, error: openAIError(answer), location: answer.headers.get('location'), leaked: leaked(answer.text, victimValues.filter((value) => !path.includes(value))) });
      }
      expect(outcomes).toEqual(cases.map(([what]) => ({
        what, error: { status: 403, type: 'permission_error', code: 'permission_denied', param: 'id' }, location: null, leaked: [],
      })));
      // Nothing was canceled.
      expect((await call('GET', `${theirs.image.baseUrl}/requests/${theirs.requestId}`, bearer(victim))).json.status).toBe('queued');
      expect((await call('GET', `${theirs.video.baseUrl}/videos/${theirs.videoId}`, bearer(victim))).json.status).toBe('queued');
    });

    it('my listings hold only my records', async () => {
      const requests = await call('GET', `${ours.image.baseUrl}/requests?limit=200`, bearer(mine));
      expect(requests.status).toBe(200);
      expect(requests.json.data.map((record: { id: string }) => record.id)).toEqual([ours.queuedRequestId]);
      const videos = await call('GET', `${ours.image.baseUrl}/videos`, bearer(mine));
      expect(videos.status).toBe(200);
      expect(videos.json.data).toEqual([]);
      expect(leaked(requests.text + videos.text, victimValues)).toEqual([]);
    });

    it('another workspace\'s storage credential cannot receive my outputs: 422 as if it did not exist, without its name', async () => {
      const answer = await call('POST', `${ours.image.baseUrl}/images/generations?async=true`, bearer(mine),
        { model: IMAGE_MODEL, prompt: 'into their bucket', size: '512x512', storage_credential_id: theirs.credentialId });
      expect(openAIError(answer)).toEqual({ status: 422, type: 'invalid_request_error', code: 'storage_credential_not_found', param: 'storage_credential_id' });
      expect(leaked(answer.text, victimValues)).toEqual([]);
      expect((await call('GET', `${ours.image.baseUrl}/requests?limit=200`, bearer(mine))).json.data).toHaveLength(1);
    });
  });

  describe('GraphQL', () => {
    /**
     * Every operation of schema.graphql that takes the id of a workspace's record
     * (gateway/graphql/resolvers/*), called with the victim's id: [operation, query, variables, code].
     * Deployments and requests answer FORBIDDEN (as REST's 403 for records), keys, webhook
     * endpoints and deliveries, storage credentials and batches NOT_FOUND (batches as REST's 404
     * for them); references to the victim's
     * storage credential inside an input are BAD_USER_INPUT ("not a storage credential of this workspace").
     */
    const byId = (): Array<[string, string, Record<string, unknown>, string]> => [
      ['deployment', 'query($id: ID!) { deployment(id: $id) { id slug baseUrl status replicas { id agentId } } }', { id: theirs.chat.id }, 'FORBIDDEN'],
      ['deployment.scalingDecisions', 'query($id: ID!) { deployment(id: $id) { scalingDecisions { reason inputs } } }', { id: theirs.chat.id }, 'FORBIDDEN'],
      ['requests(deploymentId)', 'query($id: ID!) { requests(deploymentId: $id) { id status } }', { id: theirs.image.id }, 'FORBIDDEN'],
      ['request', 'query($id: ID!) { request(id: $id) { id status deploymentId outputUrls } }', { id: theirs.requestId }, 'FORBIDDEN'],
      ['webhookDelivery', 'query($id: ID!) { webhookDelivery(id: $id) { id url attemptLog { requestBody signature } } }', { id: theirs.deliveryId }, 'NOT_FOUND'],
      ['updateDeployment', 'mutation($id: ID!) { updateDeployment(id: $id, input: {maxReplicas: 3}) { id maxReplicas } }', { id: theirs.chat.id }, 'FORBIDDEN'],
      ['pauseDeployment', 'mutation($id: ID!) { pauseDeployment(id: $id) { id status } }', { id: theirs.chat.id }, 'FORBIDDEN'],
      // Running: a state check before the ownership check would answer INVALID_STATE_TRANSITION and tell.
      ['resumeDeployment', 'mutation($id: ID!) { resumeDeployment(id: $id) { id status } }', { id: theirs.chat.id }, 'FORBIDDEN'],
      ['deleteDeployment', 'mutation($id: ID!) { deleteDeployment(id: $id) { id status } }', { id: theirs.chat.id }, 'FORBIDDEN'],
      ['cancelRequest', 'mutation($id: ID!) { cancelRequest(id: $id) { id status } }', { id: theirs.requestId }, 'FORBIDDEN'],
      ['replicaLogs', 'query($id: ID!) { replicaLogs(deploymentId: $id) { replicaId message } }', { id: theirs.chat.id }, 'FORBIDDEN'],
      ['playgroundImage(apiKeyId)', 'mutation($id: ID!, $d: ID!) { playgroundImage(input: {apiKeyId: $id, deploymentId: $d, prompt: "x"}) { requestId urls } }', { id: theirs.keyId, d: ours.image.id }, 'NOT_FOUND'],
      ['playgroundImage(deploymentId)', 'mutation($k: ID!, $id: ID!) { playgroundImage(input: {apiKeyId: $k, deploymentId: $id, prompt: "x"}) { requestId urls } }', { k: mine.apiKeyId, id: theirs.image.id }, 'FORBIDDEN'],
      ['batch', 'query($id: ID!) { batch(id: $id) { id status inputFileId inputFileUrl outputFileUrl } }', { id: theirs.batchId }, 'NOT_FOUND'],
      ['batches(deploymentId)', 'query($id: ID!) { batches(deploymentId: $id) { id inputFileId } }', { id: theirs.chat.id }, 'FORBIDDEN'],
      ['cancelBatch', 'mutation($id: ID!) { cancelBatch(id: $id) { id status } }', { id: theirs.batchId }, 'NOT_FOUND'],
      ['regenerateApiKey', 'mutation($id: ID!) { regenerateApiKey(id: $id) { plaintext apiKey { id } } }', { id: theirs.keyId }, 'NOT_FOUND'],
      ['setApiKeyLimits', 'mutation($id: ID!) { setApiKeyLimits(id: $id, limits: {rpmLimit: 1, tpdLimit: 1}) { id rpmLimit } }', { id: theirs.keyId }, 'NOT_FOUND'],
      ['revokeApiKey', 'mutation($id: ID!) { revokeApiKey(id: $id) { id } }', { id: theirs.keyId }, 'NOT_FOUND'],
      ['updateWebhookEndpoint (url)', 'mutation($id: ID!, $url: String) { updateWebhookEndpoint(id: $id, input: {url: $url}) { id url } }', { id: theirs.endpointId, url: `${receiver.base}/ok/hijacked` }, 'NOT_FOUND'],
      ['updateWebhookEndpoint (disable)', 'mutation($id: ID!) { updateWebhookEndpoint(id: $id, input: {enabled: false}) { id enabled } }', { id: theirs.endpointId }, 'NOT_FOUND'],
      ['sendTestWebhook', 'mutation($id: ID!) { sendTestWebhook(endpointId: $id) { id url } }', { id: theirs.endpointId }, 'NOT_FOUND'],
      ['deleteWebhookEndpoint', 'mutation($id: ID!) { deleteWebhookEndpoint(id: $id) { id } }', { id: theirs.endpointId }, 'NOT_FOUND'],
      ['verifyStorageCredential', 'mutation($id: Int!) { verifyStorageCredential(id: $id) { id status statusMessage } }', { id: theirs.credentialId }, 'NOT_FOUND'],
      ['deleteStorageCredential', 'mutation($id: Int!) { deleteStorageCredential(id: $id) { id bucket } }', { id: theirs.credentialId }, 'NOT_FOUND'],
      ['createDeployment(storageCredentialId)', `mutation($id: Int!) { createDeployment(input: {modelId: "${IMAGE_MODEL}", priceCapPerHour: 1, provider: "external", storageCredentialId: $id}) { deployment { id } } }`, { id: theirs.credentialId }, 'BAD_USER_INPUT'],
      ['updateDeployment(storageCredentialId) of my own', 'mutation($mine: ID!, $id: Int!) { updateDeployment(id: $mine, input: {storageCredentialId: $id}) { id storageCredentialId } }', { mine: ours.image.id, id: theirs.credentialId }, 'BAD_USER_INPUT'],
    ];

    it('every operation given another workspace\'s id is refused with its code, returns no data and reveals nothing', async () => {
      const outcomes = [];
      for (const [operation, query, variables] of byId()) {
        const answer = await asMine(query, variables);
        const sent = Object.values(variables).map(String);
        outcomes.push({
          operation, status: answer.status < 500, code: answer.body.errors?.[0]?.extensions.code, errors: answer.body.errors?.length, data: answer.body.data ?? null,
          leaked: leaked(answer.text, victimValues.filter((value) => !sent.some((id) => id.includes(value)))),
        });
      }
      expect(outcomes).toEqual(byId().map(([operation, , , code]) => ({ operation, status: true, code, errors: 1, data: null, leaked: [] })));
    });

    it('delivery log filters by another workspace\'s endpoint or request find nothing', async () => {
      const query = 'query($endpointId: ID, $requestId: ID) { webhookDeliveries(endpointId: $endpointId, requestId: $requestId) { id url } }';
      expect(ok(await asMine(query, { endpointId: theirs.endpointId })).webhookDeliveries).toEqual([]);
      expect(ok(await asMine(query, { requestId: theirs.requestId })).webhookDeliveries).toEqual([]);
      // The victim's own log has the delivery the filters would have matched.
      expect(ok(await asVictim(query, { endpointId: theirs.endpointId })).webhookDeliveries.map((row: { id: string }) => row.id)).toContain(theirs.deliveryId);
    });

    it('every list, billing and usage query shows only my records', async () => {
      const range = { from: new Date(Date.now() - 3_600_000).toISOString(), to: new Date(Date.now() + 60_000).toISOString() };
      const answer = await asMine(`query($from: DateTimeISO!, $to: DateTimeISO!, $image: ID!) {
        deployments { id slug }
        apiKeys { id name }
        webhookEndpoints { id url description }
        webhookDeliveries(limit: 200) { id url endpointId }
        storageCredentials { id name bucket }
        requests(deploymentId: $image, limit: 200) { id }
        batches(limit: 100) { id inputFileId }
        byDeployment: usage(from: $from, to: $to, groupBy: "deployment") { key label requests }
        byKey: usage(from: $from, to: $to, groupBy: "api_key") { key label requests }
        costs(from: $from, to: $to, groupBy: "deployment") { key label }
        ledgerEntries(from: $from, to: $to, limit: 200) { kind deploymentId deploymentLabel }
        creditBalance
      }`, { ...range, image: ours.image.id });
      const data = ok(answer);
      expect(data.deployments.map((row: { id: string }) => row.id).sort()).toEqual([ours.chat.id, ours.image.id].sort());
      expect(data.apiKeys.map((row: { id: string }) => row.id)).toEqual([mine.apiKeyId]);
      expect(data.webhookEndpoints).toEqual([]);
      expect(data.webhookDeliveries).toEqual([]);
      expect(data.storageCredentials).toEqual([]);
      expect(data.requests).toEqual([{ id: ours.queuedRequestId }]);
      expect(data.batches).toEqual([]);
      expect(data.byDeployment.map((row: { key: string }) => row.key)).toEqual([ours.chat.id]);
      expect(data.byKey.map((row: { key: string }) => row.key)).toEqual([mine.apiKeyId]);
      expect(leaked(answer.text, victimValues)).toEqual([]);
    });
  });

  describe('subscriptions', () => {
    const DEPLOYMENT_UPDATED = 'subscription { deploymentUpdated { id status maxReplicas priceCapPerHour } }';
    const REQUEST_UPDATED = 'subscription { requestUpdated { id status deploymentId } }';
    const ATTEMPT_LOGGED = 'subscription { webhookDeliveryLogged { id deliveryId url requestBody signature } }';
    const REPLICA_LOAD = 'subscription($id: ID!) { replicaLoad(deploymentId: $id) { deploymentId replicaId inFlight } }';
    let live: LiveSubscription[] = [];

    afterEach(() => {
      for (const subscription of live) subscription.stop();
      live = [];
    });

    const open = (workspace: TestWorkspace, query: string, variables: Record<string, unknown> = {}) => {
      const subscription = subscribe(test.url, bearer(workspace), query, variables);
      live.push(subscription);
      return subscription;
    };

    it('another workspace\'s deployment, request, delivery and replica events never reach my subscriptions, its deployment id included', async () => {
      const spying = {
        deploymentUpdated: open(mine, DEPLOYMENT_UPDATED),
        requestUpdated: open(mine, REQUEST_UPDATED),
        webhookDeliveryLogged: open(mine, ATTEMPT_LOGGED),
        'replicaLoad(victim deployment)': open(mine, REPLICA_LOAD, { id: theirs.chat.id }),
      };
      const control = {
        deploymentUpdated: open(victim, DEPLOYMENT_UPDATED),
        requestUpdated: open(victim, REQUEST_UPDATED),
        webhookDeliveryLogged: open(victim, ATTEMPT_LOGGED),
        'replicaLoad(victim deployment)': open(victim, REPLICA_LOAD, { id: theirs.chat.id }),
      };
      await Promise.all(live.map((subscription) => subscription.ready));

      // The victim's own activity, which its own subscriptions see.
      ok(await asVictim('mutation($id: ID!) { updateDeployment(id: $id, input: {priceCapPerHour: 3}) { id } }', { id: theirs.chat.id }));
      ok(await asVictim('mutation($id: ID!) { cancelRequest(id: $id) { id } }', { id: theirs.spareRequestId }));
      ok(await asVictim('mutation($id: ID!) { sendTestWebhook(endpointId: $id) { id } }', { id: theirs.endpointId }));
      await waitFor(() => Object.values(control).every((subscription) => subscription.events.length > 0), 15_000, 'the victim\'s own subscriptions to see its events');
      // Events published meanwhile to every subscriber have reached mine too, if they were going to.
      await sleep(300);

      const seen = Object.fromEntries(Object.entries(spying).map(([name, subscription]) => [name, { events: subscription.events, leaked: leaked(JSON.stringify(subscription.errors), victimValues.filter((value) => value !== theirs.chat.id)) }]));
      expect(seen).toEqual(Object.fromEntries(Object.keys(spying).map((name) => [name, { events: [], leaked: [] }])));
      // Silence from live sockets, not from closed ones (replicaLoad may refuse the victim's id instead, with an error).
      expect([spying.deploymentUpdated, spying.requestUpdated, spying.webhookDeliveryLogged].map((subscription) => ({ closed: subscription.closed, errors: subscription.errors })))
        .toEqual([0, 1, 2].map(() => ({ closed: null, errors: [] })));
    });

    it('the same subscriptions do deliver my own events (the silence above is isolation, not a dead subscription)', async () => {
      const deployments = open(mine, DEPLOYMENT_UPDATED);
      const requests = open(mine, REQUEST_UPDATED);
      await Promise.all([deployments.ready, requests.ready]);
      ok(await asMine('mutation($id: ID!) { updateDeployment(id: $id, input: {priceCapPerHour: 2.5}) { id } }', { id: ours.chat.id }));
      ok(await asMine('mutation($id: ID!) { cancelRequest(id: $id) { id } }', { id: ours.queuedRequestId }));
      await waitFor(() => deployments.events.length > 0 && requests.events.length > 0, 10_000, 'my own events');
      expect(deployments.events.every((event) => event.deploymentUpdated.id === ours.chat.id)).toBe(true);
      expect(requests.events.map((event) => event.requestUpdated)).toEqual([{ id: ours.queuedRequestId, status: 'canceled', deploymentId: ours.image.id }]);
    });
  });

  it('afterwards the victim\'s keys, deployments, endpoints, credentials and records are exactly as the victim left them', async () => {
    const state = ok(await asVictim(`query($chat: ID!, $request: ID!, $batch: ID!) {
      deployment(id: $chat) { status maxReplicas priceCapPerHour }
      apiKeys { id rpmLimit tpdLimit regeneratedAt }
      webhookEndpoints { id url enabled }
      storageCredentials { id status }
      request(id: $request) { status }
      batch(id: $batch) { cancellingAt }
    }`, { chat: theirs.chat.id, request: theirs.requestId, batch: theirs.batchId }));
    expect(state.deployment).toEqual({ status: 'Running', maxReplicas: 1, priceCapPerHour: 3 });
    expect(state.apiKeys).toEqual(expect.arrayContaining([{ id: theirs.keyId, rpmLimit: 77, tpdLimit: 1_000_000, regeneratedAt: null }]));
    expect(state.apiKeys).toHaveLength(2);
    expect(state.webhookEndpoints).toEqual([{ id: theirs.endpointId, url: theirs.endpointUrl, enabled: true }]);
    expect(state.storageCredentials).toEqual([{ id: theirs.credentialId, status: 'unverified' }]);
    expect(state.batch).toEqual({ cancellingAt: null });
    expect(state.request).toEqual({ status: 'queued' });
    expect(receiver.received.map((delivery) => delivery.path).every((path) => path === '/ok/victim-endpoint')).toBe(true);
    for (const key of [victim.apiKey, theirs.keyPlaintext]) {
      expect((await call('POST', `${theirs.chat.baseUrl}/chat/completions`, `Bearer ${key}`, chatBody)).status).toBe(200);
    }
  });
});
