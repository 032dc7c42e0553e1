import { Writable } from 'node:stream';
import pino from 'pino';
import { waitFor } from '../support/test-server';
import { PRICE_PER_MILLION, SHARED_ID, startSharingFixture, type SharingFixture } from './support/sharing-fixture';

/**
 * What a burst of guests leaves in the ledger, and what a guest's words leave in the logs:
 * the server and its agents run at trace level, every line kept.
 */
describe('shared serving: the ledger after a burst, and isolation of guest content', () => {
  let fixture: SharingFixture;
  const lines: string[] = [];
  let owner: { id: string; apiKey: string };
  let shared: { id: string; baseUrl: string };

  beforeAll(async () => {
    const sink = new Writable({ write: (chunk, _encoding, done) => { lines.push(chunk.toString()); done(); } });
    fixture = await startSharingFixture({
      logger: pino({ level: 'trace' }, sink),
      gateway: { logLevel: 'trace' },
      controlPlane: { localAgentEnv: { WORKER_LOG_LEVEL: 'trace' } },
    });
    owner = await fixture.workspace('owner');
    shared = await fixture.sharedDeployment(owner.apiKey);
    await fixture.test.waitForReplicas(shared.id, 1);
  });

  afterAll(async () => {
    await fixture?.test.stop();
  });

  const query = (sql: string, parameters: unknown[] = []) => fixture.test.server.controlPlane.dataSource.query(sql, parameters);

  it('a concurrent burst past idle capacity: every success charged exactly once at the model\'s rates, refusals and failures free, balances equal their rows', async () => {
    const guest = await fixture.workspace('bursty guest', '1');
    const client = fixture.guestClient(guest.apiKey);
    const burst = await Promise.allSettled(Array.from({ length: 24 }, async (_, index) => {
      const body = { model: SHARED_ID, messages: [{ role: 'user' as const, content: `request ${index}` }], max_tokens: 3 + (index % 4) };
      if (index % 3 === 0) {
        const stream = await client.chat.completions.create({ ...body, stream: true, stream_options: { include_usage: true } });
        let usage;
        for await (const chunk of stream) if (chunk.usage) usage = chunk.usage;
        return usage!;
      }
      if (index % 7 === 0) {
        // Fails after a token: nothing is charged for it.
        await client.chat.completions.create({ ...body, cpu_engine: { fail_after_tokens: 1 } } as any);
        return null;
      }
      return (await client.chat.completions.create(body)).usage!;
    }));
    const served = burst.filter((result) => result.status === 'fulfilled' && result.value).map((result) => (result as PromiseFulfilledResult<any>).value);
    const refused = burst.filter((result) => result.status === 'rejected').map((result) => (result as PromiseRejectedResult).reason);
    expect(served.length).toBeGreaterThan(0);
    expect(refused.every((error) => [429, 502].includes(error.status))).toBe(true);
    expect(refused.some((error) => error.status === 429)).toBe(true);

    await waitFor(async () => (await query(`SELECT count(*)::int AS n FROM billing_ledger WHERE workspace_id = $1 AND kind = 'guest_debit'`, [guest.id]))[0].n === served.length
      && (await query('SELECT count(*)::int AS n FROM credit_reservations WHERE workspace_id = $1', [guest.id]))[0].n === 0, 10_000, 'every success settled, every hold gone');
    const [totals] = await query(`
      SELECT (SELECT credit_balance FROM workspaces WHERE id = $1)::text AS balance,
        (SELECT sum(amount) FROM billing_ledger WHERE workspace_id = $1)::text AS rows_sum,
        (SELECT sum(amount) FROM billing_ledger WHERE workspace_id = $1 AND kind = 'guest_debit')::text AS debits,
        (SELECT sum(amount) FROM billing_ledger WHERE kind = 'owner_credit' AND shared_request_id IN
          (SELECT shared_request_id FROM billing_ledger WHERE workspace_id = $1 AND kind = 'guest_debit'))::text AS credits,
        (SELECT sum(prompt_tokens) FROM billing_ledger WHERE workspace_id = $1 AND kind = 'guest_debit')::int AS prompt,
        (SELECT sum(completion_tokens) FROM billing_ledger WHERE workspace_id = $1 AND kind = 'guest_debit')::int AS completion,
        (SELECT count(*) FROM billing_ledger WHERE workspace_id = $1 AND kind = 'guest_debit'
          AND amount <> -(prompt_tokens * $2::numeric + completion_tokens * $2::numeric) / 1000000)::int AS mispriced`, [guest.id, PRICE_PER_MILLION]);
    // To the cent and beyond: numeric equality, no float anywhere.
    expect(totals.balance).toBe(totals.rows_sum);
    expect(`-${totals.credits}`).toBe(totals.debits);
    expect(totals.mispriced).toBe(0);
    expect(totals.prompt).toBe(served.reduce((sum, usage) => sum + usage.prompt_tokens, 0));
    expect(totals.completion).toBe(served.reduce((sum, usage) => sum + usage.completion_tokens, 0));
    const [{ ok }] = await query(`SELECT $1::numeric = 1 + $2::numeric AS ok`, [totals.balance, totals.debits]);
    expect(ok).toBe(true);
  });

  it('a guest\'s usage record names the owner\'s deployment that served it and the shared model; the guest\'s own answers name only the shared model', async () => {
    const guest = await fixture.workspace('counted guest', '1');
    const client = fixture.guestClient(guest.apiKey);
    const answer = await client.chat.completions.create({ model: SHARED_ID, messages: [{ role: 'user', content: 'count me' }], max_tokens: 4 });
    await waitFor(async () => (await query('SELECT count(*)::int AS n FROM usage_records WHERE workspace_id = $1', [guest.id]))[0].n === 1, 5_000, 'the usage record');
    expect(await query('SELECT deployment_id, shared_model, replica_id, total_tokens FROM usage_records WHERE workspace_id = $1', [guest.id]))
      .toEqual([{ deployment_id: shared.id, shared_model: SHARED_ID, replica_id: null, total_tokens: answer.usage!.total_tokens }]);

    const window = { from: new Date(Date.now() - 86_400_000).toISOString(), to: new Date(Date.now() + 86_400_000).toISOString() };
    const usage = async (groupBy: string) => (await fixture.graphql(`query($from: DateTimeISO!, $to: DateTimeISO!, $groupBy: String!) {
      usage(from: $from, to: $to, groupBy: $groupBy) { key requests totalTokens } }`, { ...window, groupBy }, guest.apiKey)).data.usage;
    expect(await usage('deployment')).toEqual([{ key: SHARED_ID, requests: 1, totalTokens: answer.usage!.total_tokens }]);
    const answers = JSON.stringify([answer, await usage('day'), await usage('api_key'), await fixture.graphql(
      `query($from: DateTimeISO!, $to: DateTimeISO!) { ledgerEntries(from: $from, to: $to) { kind modelId deploymentId replicaId } }`, window, guest.apiKey)]);
    expect(answers).not.toContain(shared.id);
  });

  it('never writes a guest\'s prompt or output to any log, even at trace, nor shows it to the owner', async () => {
    const guest = await fixture.workspace('private guest', '1');
    const client = fixture.guestClient(guest.apiKey);
    const marker = `guest-secret-${Date.now().toString(36)}`;
    const answer = await client.chat.completions.create({ model: SHARED_ID, messages: [{ role: 'user', content: `${marker} plain` }], max_tokens: 8 });
    const stream = await client.chat.completions.create({ model: SHARED_ID, messages: [{ role: 'user', content: `${marker} streamed` }], max_tokens: 8, stream: true });
    let streamed = '';
    for await (const chunk of stream) streamed += chunk.choices[0]?.delta?.content ?? '';
    await expect(client.chat.completions.create({ model: SHARED_ID, messages: [{ role: 'user', content: `${marker} failing` }], max_tokens: 8, cpu_engine: { fail_after_tokens: 2 } } as any))
      .rejects.toMatchObject({ status: 502 });
    await expect(client.chat.completions.create({ model: SHARED_ID, messages: [{ role: 'user', content: `${marker} refused` }], temperature: 9 }))
      .rejects.toMatchObject({ status: 400 });
    const output = answer.choices[0].message.content!;
    expect(output.split(' ').length).toBeGreaterThan(3);
    await waitFor(async () => (await query(`SELECT count(*)::int AS n FROM billing_ledger WHERE workspace_id = $1`, [guest.id]))[0].n === 3, 5_000, 'settled');

    const logs = lines.join('');
    // The capture works: it holds this server's request lines and its agents' trace-level output (from their start).
    expect(logs).toContain('"deployment":"shared/meta-llama/Llama-3.1-8B-Instruct","status":502');
    expect(logs).toContain('"source":"agent"');
    expect(logs).not.toContain(marker);
    expect(logs).not.toContain(output);
    expect(logs).not.toContain(streamed.trim());

    // The owner's views of its shared deployment carry tokens and money, never content or the guest.
    const window = { from: new Date(Date.now() - 86_400_000).toISOString(), to: new Date(Date.now() + 86_400_000).toISOString() };
    const ownerViews = JSON.stringify(await Promise.all([
      fixture.graphql(`query($from: DateTimeISO!, $to: DateTimeISO!) { ledgerEntries(from: $from, to: $to) { kind amount modelId deploymentId promptTokens completionTokens } }`, window, owner.apiKey),
      fixture.graphql(`query($from: DateTimeISO!, $to: DateTimeISO!) { sharingEarnings(from: $from, to: $to) { key requests earnings } }`, window, owner.apiKey),
      fixture.graphql(`query { requests { id } }`, {}, owner.apiKey),
    ]));
    expect(ownerViews).toContain('owner_credit');
    expect(ownerViews).not.toContain(marker);
    expect(ownerViews).not.toContain(guest.id);
  });
});
