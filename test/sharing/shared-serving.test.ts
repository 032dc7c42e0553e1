import { createClient } from 'graphql-ws';
import OpenAI from 'openai';
import WebSocket from 'ws';
import { waitFor } from '../support/test-server';
import { chatOnce } from '../support/chat';
import { parsePrometheusText, sampleValue } from '../telemetry/support/prometheus-text';
import { PRICE_PER_MILLION, SHARED_ID, SHARED_MODEL, slowChat, startSharingFixture, type SharingFixture } from './support/sharing-fixture';

/**
 * Shared serving end to end: owners open idle capacity (a rolling restart seen through the
 * subscription), guests of another workspace call it with the official SDK and are billed
 * per token, and every error the shared endpoint has.
 */
describe('shared serving', () => {
  let fixture: SharingFixture;
  let owner: { id: string; apiKey: string };
  let guest: { id: string; apiKey: string };

  beforeAll(async () => {
    fixture = await startSharingFixture();
    owner = await fixture.workspace('owner');
    guest = await fixture.workspace('guest', '5');
  });

  afterAll(async () => {
    await fixture?.test.stop();
  });

  const ownerChat = (baseUrl: string) => chatOnce(baseUrl, owner.apiKey);
  /** Paces an owner's polling loop: its key has an RPM limit like any other. */
  const pause = () => new Promise((resolve) => setTimeout(resolve, 15));
  const deleteDeployment = async (id: string) =>
    expect((await fixture.graphql(`mutation($id: ID!) { deleteDeployment(id: $id) { status } }`, { id }, owner.apiKey)).data?.deleteDeployment.status).toBe('Deleted');
  const sharedModel = async (apiKey: string) =>
    (await fixture.graphql(`query { sharedModel(id: "${SHARED_ID}") { availability idleGuestSlots inputPricePerMillion } }`, {}, apiKey)).data.sharedModel;
  const setSharing = async (id: string, on: boolean) =>
    (await fixture.graphql(`mutation($id: ID!, $on: Boolean!) { updateDeployment(id: $id, input: {shareIdleCapacity: $on}) { sharing shareIdleCapacity } }`, { id, on }, owner.apiKey));

  it('refuses to share what cannot be shared, with a 400 that names why', async () => {
    const cases: Array<[string, string, RegExp]> = [
      ['black-forest-labs/FLUX.1-schnell', 'local', /not a chat model/],
      ['Qwen/Qwen2.5-7B', 'local', /not a chat model/],
      ['Qwen/Qwen2.5-VL-7B-Instruct', 'local', /not an official catalog model/],
      [SHARED_MODEL, 'external', /external deployment/],
    ];
    for (const [modelId, provider, message] of cases) {
      const result = await fixture.graphql(`mutation($model: String!, $provider: String!) { createDeployment(input: {modelId: $model, priceCapPerHour: 1, provider: $provider, shareIdleCapacity: true}) { deployment { id } } }`,
        { model: modelId, provider }, owner.apiKey);
      expect(result.errors?.[0].extensions).toMatchObject({ code: 'BAD_USER_INPUT', param: 'shareIdleCapacity' });
      expect(result.errors?.[0].message).toMatch(message);
    }
    const notShared = await fixture.graphql(`query { deployments { id } }`, {}, owner.apiKey);
    expect(notShared.data.deployments).toEqual([]);
  });

  it('turns sharing on by a rolling restart (activating → shared, seen live); one replica answers 503 while it restarts', async () => {
    const created = await fixture.graphql(`mutation { createDeployment(input: {modelId: "${SHARED_MODEL}", priceCapPerHour: 1}) { deployment { id baseUrl sharing } } }`, {}, owner.apiKey);
    const { id, baseUrl, sharing } = created.data.createDeployment.deployment;
    expect(sharing).toBe('not_shared');
    try {
      await fixture.test.waitForReplicas(id, 1);
      const before = (await fixture.deployment(id, owner.apiKey)).replicas[0].id;

      const seen: string[] = [];
      const client = createClient({ url: `${fixture.test.url.replace('http', 'ws')}/graphql`, webSocketImpl: WebSocket, connectionParams: { authorization: `Bearer ${owner.apiKey}` } });
      const unsubscribe = client.subscribe({ query: 'subscription { deploymentUpdated { id sharing } }' }, {
        next: (message: any) => {
          const update = message.data?.deploymentUpdated;
          if (update?.id === id && seen[seen.length - 1] !== update.sharing) seen.push(update.sharing);
        },
        error: () => {}, complete: () => {},
      });
      await new Promise((resolve) => setTimeout(resolve, 200));

      // The owner keeps calling while the only replica restarts.
      let polling = true;
      const answers: Array<{ status: number; body: any }> = [];
      const poll = (async () => {
        while (polling) {
          answers.push(await ownerChat(baseUrl));
          await pause();
        }
      })();
      const enabled = await setSharing(id, true);
      expect(enabled.data.updateDeployment).toEqual({ sharing: 'activating', shareIdleCapacity: true });
      await fixture.waitForSharing(id, owner.apiKey, 'shared');
      polling = false;
      await poll;
      unsubscribe();
      await client.dispose();

      expect(seen).toEqual(['activating', 'shared']);
      const replicas = (await fixture.deployment(id, owner.apiKey)).replicas;
      expect(replicas.find((replica: any) => replica.id === before)).toMatchObject({ status: 'Terminated', statusReason: expect.stringMatching(/restarting for sharing/) });
      expect(replicas.filter((replica: any) => replica.status === 'Running')).toHaveLength(1);
      const unavailable = answers.filter((answer) => answer.status === 503);
      expect(unavailable.length).toBeGreaterThan(0);
      expect(unavailable[0].body.error).toMatchObject({ code: 'no_replica_available', message: expect.stringMatching(/restarting for sharing/) });
      expect(answers.filter((answer) => answer.status !== 200 && answer.status !== 503)).toEqual([]);
      expect((await ownerChat(baseUrl)).status).toBe(200);
    } finally {
      await deleteDeployment(id);
    }
  });

  it('restarts two replicas one at a time: the owner is served throughout', async () => {
    const created = await fixture.graphql(`mutation { createDeployment(input: {modelId: "${SHARED_MODEL}", priceCapPerHour: 1, minReplicas: 2, maxReplicas: 2}) { deployment { id baseUrl } } }`, {}, owner.apiKey);
    const { id, baseUrl } = created.data.createDeployment.deployment;
    try {
      await fixture.test.waitForReplicas(id, 2);
      let polling = true;
      const statuses: number[] = [];
      const poll = (async () => {
        while (polling) {
          statuses.push((await ownerChat(baseUrl)).status);
          await pause();
        }
      })();
      await setSharing(id, true);
      await fixture.waitForSharing(id, owner.apiKey, 'shared');
      polling = false;
      await poll;
      expect(statuses.length).toBeGreaterThan(10);
      expect(statuses.filter((status) => status !== 200)).toEqual([]);
      const replicas = (await fixture.deployment(id, owner.apiKey)).replicas;
      expect(replicas.filter((replica: any) => replica.status === 'Terminated')).toHaveLength(2);
      expect(replicas.filter((replica: any) => replica.status === 'Running')).toHaveLength(2);
    } finally {
      await deleteDeployment(id);
    }
  });

  describe('a guest of another workspace', () => {
    let shared: { id: string; baseUrl: string };
    let client: OpenAI;

    beforeAll(async () => {
      shared = await fixture.sharedDeployment(owner.apiKey);
      client = fixture.guestClient(guest.apiKey);
      await fixture.test.waitForReplicas(shared.id, 1);
    });

    it('lists the shared model with prices and availability, and retrieves it by id', async () => {
      const list = await client.models.list();
      const entry = list.data.find((model) => model.id === SHARED_ID) as any;
      expect(entry).toMatchObject({
        object: 'model', owned_by: 'shared', availability: 'Available', engine: 'cpu-stand-in', note: expect.stringContaining('placeholder words'),
        pricing: { input_per_million: PRICE_PER_MILLION, output_per_million: PRICE_PER_MILLION, currency: 'USD' },
      });
      expect(list.data.every((model) => model.id.startsWith('shared/'))).toBe(true);
      expect(await client.models.retrieve(SHARED_ID)).toMatchObject({ id: SHARED_ID, availability: 'Available' });
      await expect(client.models.retrieve('shared/black-forest-labs/FLUX.1-schnell')).rejects.toMatchObject({ status: 404 });
      expect(await sharedModel(guest.apiKey)).toEqual({ availability: 'Available', idleGuestSlots: 3, inputPricePerMillion: PRICE_PER_MILLION });
    });

    it('chats plain and streamed with rate-limit headers, and is billed per token, the owner credited the same', async () => {
      const { data, response } = await client.chat.completions.create({ model: SHARED_ID, messages: [{ role: 'user', content: 'hello there' }], max_tokens: 5 }).withResponse();
      expect(response.status).toBe(200);
      expect(response.headers.get('x-ratelimit-remaining')).toMatch(/^\d+$/);
      expect(response.headers.get('x-ratelimit-reset')).toMatch(/^\d+$/);
      expect(data.choices[0].message.content).toBeTruthy();
      expect(data.usage!.completion_tokens).toBe(5);

      const stream = await client.chat.completions.create({
        model: SHARED_ID, messages: [{ role: 'user', content: 'stream it' }], max_tokens: 4, stream: true, stream_options: { include_usage: true },
      });
      let text = '';
      let usage: OpenAI.CompletionUsage | undefined;
      for await (const chunk of stream) {
        text += chunk.choices[0]?.delta?.content ?? '';
        if (chunk.usage) usage = chunk.usage;
      }
      expect(text.length).toBeGreaterThan(0);
      expect(usage!.completion_tokens).toBe(4);

      const expected = [data.usage!, usage!];
      const rows = async () => await fixture.test.server.controlPlane.dataSource.query(
        `SELECT workspace_id, kind, amount::text, prompt_tokens, completion_tokens, deployment_id, shared_request_id FROM billing_ledger WHERE kind IN ('guest_debit', 'owner_credit') ORDER BY id`);
      await waitFor(async () => (await rows()).length === 4, 5_000, 'both settlements');
      const ledger = await rows();
      for (const [index, tokens] of expected.entries()) {
        const debit = ledger.filter((row: any) => row.kind === 'guest_debit')[index];
        const credit = ledger.find((row: any) => row.kind === 'owner_credit' && row.shared_request_id === debit.shared_request_id);
        const [{ cost }] = await fixture.test.server.controlPlane.dataSource.query(
          'SELECT (($1::numeric * $3::numeric + $2::numeric * $3::numeric) / 1000000)::numeric(20,10)::text AS cost', [tokens.prompt_tokens, tokens.completion_tokens, PRICE_PER_MILLION]);
        expect(debit).toMatchObject({ workspace_id: guest.id, amount: `-${cost}`, prompt_tokens: tokens.prompt_tokens, completion_tokens: tokens.completion_tokens, deployment_id: null });
        expect(credit).toMatchObject({ workspace_id: owner.id, amount: cost, deployment_id: shared.id });
      }
      // The guest's balance is its top-up minus exactly what it was debited; no hold is left once
      // the server gives its idle credit lease back (creditLeaseIdleMs after the last admission).
      const [{ balance, debited }] = await fixture.test.server.controlPlane.dataSource.query(`
        SELECT (SELECT credit_balance::text FROM workspaces WHERE id = $1) AS balance,
          (5 + (SELECT sum(amount) FROM billing_ledger WHERE workspace_id = $1 AND kind = 'guest_debit'))::numeric(20,10)::text AS debited`, [guest.id]);
      expect(balance).toBe(debited);
      await waitFor(async () => (await fixture.test.server.controlPlane.dataSource.query('SELECT count(*)::int AS holds FROM credit_reservations'))[0].holds === 0,
        5_000, 'the idle credit lease given back');

      // The owner sees tokens, requests and earnings, never who the guest was or what it said.
      const today = new Date();
      const earnings = await fixture.graphql(`query($from: DateTimeISO!, $to: DateTimeISO!) { sharingEarnings(from: $from, to: $to, groupBy: DEPLOYMENT) { key requests promptTokens completionTokens earnings } }`,
        { from: new Date(today.getTime() - 86_400_000).toISOString(), to: new Date(today.getTime() + 86_400_000).toISOString() }, owner.apiKey);
      expect(earnings.data.sharingEarnings).toEqual([expect.objectContaining({ key: shared.id, requests: 2, completionTokens: 9 })]);
      const ownerUsage = await fixture.graphql(`query($from: DateTimeISO!, $to: DateTimeISO!) { usage(from: $from, to: $to, groupBy: "deployment") { key requests } }`,
        { from: new Date(today.getTime() - 86_400_000).toISOString(), to: new Date(today.getTime() + 86_400_000).toISOString() }, owner.apiKey);
      // Guest requests are the guest's records: none is counted on the owner's shared deployment.
      expect(ownerUsage.data.usage.find((row: any) => row.key === shared.id)).toBeUndefined();
      // The guest's own usage names the shared model, not the owner's deployment.
      const guestUsage = await fixture.graphql(`query($from: DateTimeISO!, $to: DateTimeISO!) { usage(from: $from, to: $to, groupBy: "deployment") { key requests } }`,
        { from: new Date(today.getTime() - 86_400_000).toISOString(), to: new Date(today.getTime() + 86_400_000).toISOString() }, guest.apiKey);
      expect(guestUsage.data.usage).toEqual([{ key: SHARED_ID, requests: 2 }]);

      // /metrics labels the guest's requests with the shared model it called, never the owner's deployment that served them.
      const samples = parsePrometheusText(await (await fetch(`${fixture.test.url}/metrics`)).text());
      const guestSeries = { deployment: SHARED_ID, model: SHARED_MODEL };
      expect(sampleValue(samples, 'inference_request_e2e_latency_seconds_count', guestSeries)).toBe(2);
      expect(sampleValue(samples, 'inference_request_time_to_first_token_seconds_count', guestSeries)).toBe(1);
      expect(sampleValue(samples, 'inference_tokens_total', { ...guestSeries, kind: 'completion' })).toBe(9);
      expect(sampleValue(samples, 'inference_request_e2e_latency_seconds_count', { deployment: shared.id })).toBeUndefined();
    });

    it('a guest who aborts a stream pays for the tokens it was sent, and the owner is credited the same', async () => {
      const dataSource = fixture.test.server.controlPlane.dataSource;
      const debits = async () => await dataSource.query(
        `SELECT shared_request_id, amount::text, completion_tokens FROM billing_ledger WHERE workspace_id = $1 AND kind = 'guest_debit' ORDER BY id`, [guest.id]);
      const before = (await debits()).length;
      const controller = new AbortController();
      const stream = await client.chat.completions.create({
        model: SHARED_ID, messages: [{ role: 'user', content: 'a long story' }], max_tokens: 2_000, stream: true,
        // 50 tokens/s: the stream is still running when the client leaves.
        ...({ cpu_engine: { ttft_ms: 0, tokens_per_second: 50 } } as object),
      }, { signal: controller.signal });
      let chunks = 0;
      for await (const chunk of stream) {
        if (chunk.choices[0]?.delta?.content) chunks++;
        if (chunks === 5) break; // leaving the loop closes the connection, as a client that goes away
      }
      controller.abort();
      expect(chunks).toBe(5);
      await waitFor(async () => (await debits()).length === before + 1, 5_000, 'the aborted stream settled');
      const debit = (await debits())[before];
      expect(debit.completion_tokens).toBeGreaterThanOrEqual(5);
      expect(debit.completion_tokens).toBeLessThan(2_000);
      expect(Number(debit.amount)).toBeLessThan(0);
      const [credit] = await dataSource.query(`SELECT workspace_id, amount::text FROM billing_ledger WHERE kind = 'owner_credit' AND shared_request_id = $1`, [debit.shared_request_id]);
      expect(credit).toEqual({ workspace_id: owner.id, amount: debit.amount.slice(1) });
      await waitFor(async () => (await dataSource.query('SELECT count(*)::int AS holds FROM credit_reservations'))[0].holds === 0, 5_000, 'no hold left');
    });

    it('answers 401, 404 and 400 for a bad key, an unknown model and a model without the shared/ prefix', async () => {
      await expect(fixture.guestClient('mk-not-a-key').chat.completions.create({ model: SHARED_ID, messages: [{ role: 'user', content: 'x' }] }))
        .rejects.toMatchObject({ status: 401 });
      await expect(client.chat.completions.create({ model: 'shared/nobody/nothing', messages: [{ role: 'user', content: 'x' }] }))
        .rejects.toMatchObject({ status: 404, code: 'model_not_found', param: 'model' });
      await expect(client.chat.completions.create({ model: SHARED_MODEL, messages: [{ role: 'user', content: 'x' }] }))
        .rejects.toMatchObject({ status: 400, param: 'model' });
      await expect(client.chat.completions.create({ model: SHARED_ID, messages: [] }))
        .rejects.toMatchObject({ status: 400, param: 'messages' });
      const unknownRoute = await fetch(`${fixture.test.url}/shared/v1/embeddings`, { method: 'POST', headers: { authorization: `Bearer ${guest.apiKey}` } });
      expect(unknownRoute.status).toBe(404);
    });

    it('answers 402 when the guest has no credit, or too little to hold prompt + max_tokens', async () => {
      const broke = await fixture.workspace('broke', '0');
      await expect(fixture.guestClient(broke.apiKey).chat.completions.create({ model: SHARED_ID, messages: [{ role: 'user', content: 'x' }], max_tokens: 1 }))
        .rejects.toMatchObject({ status: 402, code: 'insufficient_quota' });
      const poor = await fixture.workspace('poor', '0.0001');
      await expect(fixture.guestClient(poor.apiKey).chat.completions.create({ model: SHARED_ID, messages: [{ role: 'user', content: 'x' }], max_tokens: 100_000 }))
        .rejects.toMatchObject({ status: 402, code: 'insufficient_quota' });
      // A request it can pay for goes through.
      const paid = await fixture.guestClient(poor.apiKey).chat.completions.create({ model: SHARED_ID, messages: [{ role: 'user', content: 'x' }], max_tokens: 2 });
      expect(paid.choices).toHaveLength(1);
    });

    it('answers 429 with Retry-After past idle capacity, at once, while the owner is still served from its headroom', async () => {
      const { idleGuestSlots } = await sharedModel(guest.apiKey);
      expect(idleGuestSlots).toBe(3);
      const availability: string[] = [];
      const subscriber = createClient({ url: `${fixture.test.url.replace('http', 'ws')}/graphql`, webSocketImpl: WebSocket, connectionParams: { authorization: `Bearer ${guest.apiKey}` } });
      const unsubscribe = subscriber.subscribe({ query: 'subscription { sharedModelUpdated { id availability idleGuestSlots } }' }, {
        next: (message: any) => {
          if (message.data?.sharedModelUpdated?.id === SHARED_ID) availability.push(message.data.sharedModelUpdated.availability);
        },
        error: () => {}, complete: () => {},
      });
      await new Promise((resolve) => setTimeout(resolve, 200));
      const controller = new AbortController();
      // Long enough to be still running when /metrics is read on a loaded machine; aborted below.
      // What each slow request ended with, for the failure messages below (none may end before the abort).
      const ended: string[] = [];
      const slow = Array.from({ length: idleGuestSlots }, () => fixture.guestClient(guest.apiKey).chat.completions
        .create(slowChat(8_000) as any, { signal: controller.signal })
        .then(() => ended.push('answered'), (error: any) => ended.push(`${error?.status ?? ''} ${error?.message ?? error}`)));
      await waitFor(async () => (await sharedModel(guest.apiKey)).idleGuestSlots === 0, 5_000, 'guest slots taken');
      const started = Date.now();
      const refused = await fetch(`${fixture.test.url}/shared/v1/chat/completions`, {
        method: 'POST', headers: { authorization: `Bearer ${guest.apiKey}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: SHARED_ID, messages: [{ role: 'user', content: 'one more' }], max_tokens: 2 }),
      });
      // Refused at once, not queued behind the 8 s guests (the bound leaves room for a loaded CI machine).
      expect(Date.now() - started).toBeLessThan(2_500);
      expect(refused.status).toBe(429);
      expect(refused.headers.get('retry-after')).toBe('1');
      expect(((await refused.json()) as any).error).toMatchObject({ code: 'shared_pool_busy', type: 'rate_limit_error' });
      expect((await sharedModel(guest.apiKey)).availability).toBe('Degraded');
      // Subscribers hear of it within an availability interval.
      await waitFor(() => availability.includes('Degraded'), 3_000, 'sharedModelUpdated: Degraded');
      unsubscribe();
      await subscriber.dispose();
      // The gauge counts jobs on the agents; a scrape reads it as one step after its database reads.
      let inFlight = '';
      await waitFor(async () => {
        const metrics = await (await fetch(`${fixture.test.url}/metrics`)).text();
        inFlight = metrics.split('\n').filter((line) => line.startsWith(`inference_in_flight{deployment="${shared.id}"`)).join('; ');
        return metrics.includes(`inference_in_flight{deployment="${shared.id}",class="guest"} ${idleGuestSlots}`);
      }, 2_000, 'the guest jobs in inference_in_flight').catch((error) => {
        throw new Error(`${error.message}: scraped [${inFlight}], slow requests ended [${ended.join(', ')}]`);
      });
      expect(inFlight).toContain(`inference_in_flight{deployment="${shared.id}",class="owner"} 0`);
      expect(ended).toEqual([]);
      const ownerStarted = Date.now();
      expect((await ownerChat(shared.baseUrl)).status).toBe(200);
      expect(Date.now() - ownerStarted).toBeLessThan(2_500);
      controller.abort();
      await Promise.all(slow);
      // Canceled guest requests cost nothing and hold nothing.
      await waitFor(async () => (await fixture.test.server.controlPlane.dataSource.query('SELECT count(*)::int AS n FROM credit_reservations'))[0].n === 0, 5_000, 'holds released');
    });

    it('turning sharing off stops new guest work at once (503, the key stays valid) and lets running guest requests finish', async () => {
      await waitFor(async () => (await sharedModel(guest.apiKey)).idleGuestSlots === 3, 5_000, 'idle slots back');
      const running = fixture.guestClient(guest.apiKey).chat.completions.create(slowChat(1_000, 3) as any);
      await waitFor(async () => (await sharedModel(guest.apiKey)).idleGuestSlots === 2, 5_000, 'the guest request running');
      const disabled = await setSharing(shared.id, false);
      expect(disabled.data.updateDeployment).toEqual({ sharing: 'not_shared', shareIdleCapacity: false });
      await expect(client.chat.completions.create({ model: SHARED_ID, messages: [{ role: 'user', content: 'x' }], max_tokens: 1 }))
        .rejects.toMatchObject({ status: 503, code: 'shared_model_unavailable' });
      const finished = await running;
      expect(finished.choices[0].finish_reason).toBe('length');
      expect(((await client.models.retrieve(SHARED_ID)) as any).availability).toBe('Unavailable');
    });
  });
});
