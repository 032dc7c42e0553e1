import OpenAI from 'openai';
import { waitFor } from '../support/test-server';
import { SHARED_ID, startSharingFixture, type SharingFixture } from '../sharing/support/sharing-fixture';

/** A guest's `POST /shared/v1/responses`: admitted, routed and billed as a guest's chat; its state is the guest's own. */
describe('Responses API for guests on /shared/v1', () => {
  let fixture: SharingFixture;
  let guest: { id: string; apiKey: string };
  let shared: { id: string };
  let client: OpenAI;

  beforeAll(async () => {
    fixture = await startSharingFixture();
    const owner = await fixture.workspace('owner');
    guest = await fixture.workspace('guest', '5');
    shared = await fixture.sharedDeployment(owner.apiKey);
    await fixture.test.waitForReplicas(shared.id, 1);
    client = fixture.guestClient(guest.apiKey);
  });

  afterAll(async () => {
    await fixture?.test.stop();
  });

  it('answers, streams, chains and stores a guest\'s responses, billed per token like its chat', async () => {
    const first = await client.responses.create({ model: SHARED_ID, input: 'hello there', max_output_tokens: 5 });
    expect(first.model).toBe(SHARED_ID);
    expect(first.output_text.length).toBeGreaterThan(0);
    const stream = client.responses.stream({ model: SHARED_ID, input: 'and again', previous_response_id: first.id, max_output_tokens: 5 });
    const second = await stream.finalResponse();
    expect(second.previous_response_id).toBe(first.id);
    expect(second.usage!.input_tokens).toBeGreaterThan(first.usage!.input_tokens);
    expect((await client.responses.retrieve(second.id)).output_text).toBe(second.output_text);
    expect((await client.responses.inputItems.list(second.id)).data).toHaveLength(1);

    const dataSource = fixture.test.server.controlPlane.dataSource;
    await waitFor(async () => Number((await dataSource.query(
      `SELECT count(*) AS n FROM billing_ledger WHERE workspace_id = $1 AND kind = 'guest_debit'`, [guest.id]))[0].n) >= 2, 10_000, 'the guest debits');
    const [usage] = await dataSource.query(`SELECT deployment_id, shared_model, endpoint FROM usage_records WHERE workspace_id = $1 ORDER BY created_at LIMIT 1`, [guest.id]);
    expect(usage).toEqual({ deployment_id: shared.id, shared_model: SHARED_ID, endpoint: 'responses' });
    // The guest's responses name the shared model, never the owner's deployment.
    expect(JSON.stringify([first, second, await client.responses.retrieve(second.id)])).not.toContain(shared.id);

    // Another guest sees none of it.
    const other = await fixture.workspace('other guest', '5');
    const otherClient = fixture.guestClient(other.apiKey);
    await expect(otherClient.responses.retrieve(first.id)).rejects.toMatchObject({ status: 404 });
    await expect(otherClient.responses.create({ model: SHARED_ID, input: 'x', previous_response_id: first.id })).rejects.toMatchObject({ status: 400, param: 'previous_response_id' });

    expect(await client.responses.delete(first.id)).toEqual({ id: first.id, object: 'response', deleted: true });
    await expect(client.responses.retrieve(first.id)).rejects.toMatchObject({ status: 404 });
  });

  it('refuses a bad field or an unknown shared model', async () => {
    await expect(client.responses.create({ model: SHARED_ID, input: 'x', temperature: 9 })).rejects.toMatchObject({ status: 400, param: 'temperature' });
    // A guest's turns run in the foreground only.
    await expect(client.responses.create({ model: SHARED_ID, input: 'x', background: true })).rejects.toMatchObject({ status: 400, param: 'background' });
    await expect(client.responses.create({ model: 'shared/nope', input: 'x' })).rejects.toMatchObject({ status: 404 });
  });
});
