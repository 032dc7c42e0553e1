import OpenAI, { toFile } from 'openai';
import { waitFor } from '../support/test-server';
import { loraGguf } from '../adapters/support/lora-files';
import { PRICE_PER_MILLION, SHARED_ID, SHARED_MODEL, startSharingFixture, type SharingFixture } from './support/sharing-fixture';

/**
 * An owner's LoRA adapter offered to guests of shared serving (docs/adapters.md#sharing), over
 * REST with two workspaces and real agents on the CPU engine: guests call it as
 * `shared/<adapter id>` only while the owner shares it, it runs only on the owner's sharing
 * deployment it is attached to (never on the owner's other sharing deployment of the same base),
 * the guest is debited and the owner credited at the base model's per-token price, and the
 * guest's usage record carries the adapter.
 */
describe('shared serving of an owner\'s adapter', () => {
  let fixture: SharingFixture;
  let owner: { id: string; apiKey: string };
  let guest: { id: string; apiKey: string };
  let attachedTo: { id: string; baseUrl: string };
  let other: { id: string; baseUrl: string };
  let adapterId: string;
  let guestClient: OpenAI;
  const sharedAdapter = () => `shared/${adapterId}`;
  const chat = (model: string, content = 'hello') => ({ model, messages: [{ role: 'user' as const, content }], max_tokens: 4 });
  const query = (sql: string, parameters: unknown[] = []) => fixture.test.server.controlPlane.dataSource.query(sql, parameters);
  const raw = async (body: unknown) => {
    const response = await fetch(`${fixture.test.url}/shared/v1/chat/completions`, {
      method: 'POST', headers: { authorization: `Bearer ${guest.apiKey}`, 'content-type': 'application/json' }, body: JSON.stringify(body),
    });
    return { status: response.status, error: ((await response.json()) as { error: { code: string; param: string; type: string } }).error };
  };
  const setSharing = async (shared: boolean) => {
    const result = await fixture.graphql('mutation($id: ID!, $shared: Boolean!) { setAdapterSharing(id: $id, shared: $shared) { sharedWithGuests } }',
      { id: adapterId, shared }, owner.apiKey);
    expect(result.errors).toBeUndefined();
  };
  const listed = async () => (await guestClient.models.list()).data.find((model) => model.id === sharedAdapter()) as any;

  beforeAll(async () => {
    fixture = await startSharingFixture();
    owner = await fixture.workspace('owner');
    guest = await fixture.workspace('guest', '5');
    guestClient = fixture.guestClient(guest.apiKey);
    [attachedTo, other] = await Promise.all([fixture.sharedDeployment(owner.apiKey), fixture.sharedDeployment(owner.apiKey)]);
    await fixture.test.waitForReplicas(attachedTo.id, 1);
    await fixture.test.waitForReplicas(other.id, 1);
    const ownerClient = new OpenAI({ apiKey: owner.apiKey, baseURL: attachedTo.baseUrl, maxRetries: 0 });
    const file = await ownerClient.files.create({ file: await toFile(loraGguf({ rank: 8 }), 'support.gguf'), purpose: 'user_data' });
    const created = await fixture.graphql('mutation($input: CreateAdapterInput!) { createAdapter(input: $input) { id } }',
      { input: { name: 'support-bot', baseModel: SHARED_MODEL, fileId: file.id } }, owner.apiKey);
    expect(created.errors).toBeUndefined();
    adapterId = created.data.createAdapter.id;
    const attached = await fixture.graphql('mutation($a: ID!, $d: ID!) { attachAdapter(adapterId: $a, deploymentId: $d) { id } }', { a: adapterId, d: attachedTo.id }, owner.apiKey);
    expect(attached.errors).toBeUndefined();
  }, 90_000);

  afterAll(async () => {
    await fixture?.test.stop();
  });

  it('an adapter its owner does not share answers exactly as a made-up shared model, and is not listed', async () => {
    const unshared = await raw(chat(sharedAdapter()));
    const madeUp = await raw(chat('shared/ad_nosuchadapter'));
    expect(unshared.status).toBe(404);
    expect({ ...unshared.error, message: undefined }).toEqual({ ...madeUp.error, message: undefined });
    expect(unshared.error).toMatchObject({ code: 'model_not_found', param: 'model' });
    expect(await listed()).toBeUndefined();
  });

  it('shared: listed with its base model as parent; guests call it (JSON and SSE), answered as shared/<adapter id>, only on the deployment it is attached to', async () => {
    await setSharing(true);
    await waitFor(async () => (await listed()) !== undefined, 5_000, 'the adapter listed on /shared/v1/models');
    expect(await listed()).toMatchObject({
      id: sharedAdapter(), object: 'model', owned_by: 'shared', parent: SHARED_ID, root: SHARED_ID,
      pricing: { input_per_million: PRICE_PER_MILLION, output_per_million: PRICE_PER_MILLION, currency: 'USD' },
    });
    expect((await guestClient.models.retrieve(sharedAdapter())).id).toBe(sharedAdapter());

    // An owner's slow request on the attached deployment leaves it fewer guest slots than the other: a pool placing the
    // adapter's guests by guest slots alone would send them to the other deployment, which has no such adapter.
    const connectionOf = (id: string) => fixture.test.server.controlPlane.dispatcher.connections(id)[0];
    const ownerSlow = fetch(`${attachedTo.baseUrl}/chat/completions`, {
      method: 'POST', headers: { authorization: `Bearer ${owner.apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ ...chat(SHARED_MODEL), cpu_engine: { ttft_ms: 3_000 } }),
    });
    await waitFor(() => connectionOf(attachedTo.id).inFlight === 1, 5_000, 'the owner\'s request running');
    expect(connectionOf(other.id).inFlight).toBe(0);
    const answers = [];
    for (let index = 0; index < 4; index++) answers.push(await guestClient.chat.completions.create(chat(sharedAdapter(), `question ${index}`)));
    expect((await ownerSlow).status).toBe(200);
    expect(answers.map((answer) => answer.model)).toEqual(Array(4).fill(sharedAdapter()));
    const chunks = [];
    for await (const chunk of await guestClient.chat.completions.create({ ...chat(sharedAdapter()), stream: true, stream_options: { include_usage: true } })) chunks.push(chunk);
    expect(chunks.length).toBeGreaterThan(1);
    expect(new Set(chunks.map((chunk) => chunk.model))).toEqual(new Set([sharedAdapter()]));
    // The base model is still shared beside it, on either deployment.
    expect((await guestClient.chat.completions.create(chat(SHARED_ID))).model).toBe(SHARED_MODEL);

    // A stream is settled after its last byte reached the client, and usage is written in batches: wait for the fifth.
    const adapterRecords = () => query(`SELECT deployment_id, shared_model, adapter_id FROM usage_records WHERE workspace_id = $1 AND adapter_id IS NOT NULL`, [guest.id]);
    await waitFor(async () => (await adapterRecords()).length >= 5, 5_000, 'the five adapter calls\' usage records');
    const records = await adapterRecords();
    expect(records).toHaveLength(5);
    expect(records.every((record: any) => record.deployment_id === attachedTo.id && record.shared_model === sharedAdapter() && record.adapter_id === adapterId)).toBe(true);
  });

  it('the guest is debited and the owner credited at the base model\'s per-token price, each request once', async () => {
    await guestClient.chat.completions.create(chat(sharedAdapter(), 'what does it cost'));
    const served = async () => (await query(`SELECT count(*)::int AS n FROM usage_records WHERE workspace_id = $1`, [guest.id]))[0].n as number;
    const debits = async () => (await query(`SELECT count(*)::int AS n FROM billing_ledger WHERE workspace_id = $1 AND kind = 'guest_debit'`, [guest.id]))[0].n as number;
    // 6 adapter requests and 1 of the base model by now: all seven written before the two counts are compared.
    await waitFor(async () => (await served()) >= 7 && (await debits()) === await served()
      && (await query('SELECT count(*)::int AS n FROM credit_reservations WHERE workspace_id = $1', [guest.id]))[0].n === 0, 10_000, 'every guest request settled');
    const rows = await query(`
      SELECT d.amount::text AS debit, d.model_id, c.workspace_id AS credited, c.amount::text AS credit,
        (d.amount = -(d.prompt_tokens * $2::numeric + d.completion_tokens * $2::numeric) / 1000000) AS priced
      FROM billing_ledger d LEFT JOIN billing_ledger c ON c.shared_request_id = d.shared_request_id AND c.kind = 'owner_credit'
      WHERE d.workspace_id = $1 AND d.kind = 'guest_debit'`, [guest.id, PRICE_PER_MILLION]);
    // 6 adapter requests and 1 of the base model.
    expect(rows).toHaveLength(7);
    for (const row of rows) {
      expect(row).toMatchObject({ model_id: SHARED_MODEL, credited: owner.id, priced: true });
      expect(`-${row.credit}`).toBe(row.debit);
    }
    const [tokens] = await query(`SELECT
        (SELECT sum(prompt_tokens + completion_tokens) FROM billing_ledger WHERE workspace_id = $1 AND kind = 'guest_debit')::int AS billed,
        (SELECT sum(total_tokens) FROM usage_records WHERE workspace_id = $1)::int AS used`, [guest.id]);
    expect(tokens.billed).toBe(tokens.used);
  });

  it('unshared, then deleted: its id answers as an unknown shared model again', async () => {
    await setSharing(false);
    await waitFor(async () => (await raw(chat(sharedAdapter()))).status === 404, 5_000, 'the unshared adapter refused');
    expect((await raw(chat(sharedAdapter()))).error).toMatchObject({ code: 'model_not_found', param: 'model' });
    await setSharing(true);
    await waitFor(async () => (await listed()) !== undefined, 5_000, 'shared again');
    const deleted = await fixture.graphql('mutation($id: ID!) { deleteAdapter(id: $id) { id } }', { id: adapterId }, owner.apiKey);
    expect(deleted.errors).toBeUndefined();
    await waitFor(async () => (await raw(chat(sharedAdapter()))).status === 404, 5_000, 'the deleted adapter refused');
    expect(await listed()).toBeUndefined();
  });
});
