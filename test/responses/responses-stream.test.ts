import OpenAI from 'openai';
import { waitFor, deploymentForSuite } from '../support/test-server';
import { UsageRecord } from '../../control-plane/usage/usage-record.entity';

/** `stream: true` on `POST /v1/responses`: the typed events in order, stored at the end; a cut stream stored `incomplete` and billed for what was made. */
describe('streamed responses', () => {
  const served = deploymentForSuite({ controlPlane: { localAgentEnv: { WORKER_CPU_TOKENS_PER_SECOND: '200' } } });

  it('sends the typed events in order, each numbered, and ends with the stored response', async () => {
    const stream = await served.client.responses.create({ input: 'Tell me about replicas', max_output_tokens: 10, stream: true });
    const events: OpenAI.Responses.ResponseStreamEvent[] = [];
    for await (const event of stream) events.push(event);
    expect(events.map((event) => event.sequence_number)).toEqual(events.map((_, index) => index));
    const types = events.map((event) => event.type);
    const deltas = types.filter((type) => type === 'response.output_text.delta').length;
    expect(deltas).toBeGreaterThan(1);
    const last = events.at(-1)!;
    expect(['response.completed', 'response.incomplete']).toContain(last.type);
    expect(types).toEqual([
      'response.created', 'response.in_progress', 'response.output_item.added', 'response.content_part.added',
      ...Array<string>(deltas).fill('response.output_text.delta'),
      'response.output_text.done', 'response.content_part.done', 'response.output_item.done', last.type,
    ]);
    const created = (events[0] as OpenAI.Responses.ResponseCreatedEvent).response;
    expect(created.status).toBe('in_progress');
    const final = (last as OpenAI.Responses.ResponseCompletedEvent).response;
    expect(final.id).toBe(created.id);
    const text = events.filter((event) => event.type === 'response.output_text.delta').map((event) => (event as OpenAI.Responses.ResponseTextDeltaEvent).delta).join('');
    expect((final.output[0] as OpenAI.Responses.ResponseOutputMessage).content[0]).toMatchObject({ type: 'output_text', text });
    expect(final.usage!.output_tokens).toBeGreaterThan(0);
    expect(final.usage!.output_tokens).toBeLessThanOrEqual(10);
    if (final.status === 'incomplete') expect(final.incomplete_details).toEqual({ reason: 'max_output_tokens' });
    const stored = await served.client.responses.retrieve(final.id);
    expect(stored.output_text).toBe(text);
    expect(stored.status).toBe(final.status);
    // The same prompt unstreamed: the same text and usage.
    const plain = await served.client.responses.create({ input: 'Tell me about replicas', max_output_tokens: 10 });
    expect(plain.output_text).toBe(text);
    expect(plain.usage).toEqual(final.usage);
  });

  it('works with the SDK\'s responses.stream helper and chains from a streamed turn', async () => {
    const seen: string[] = [];
    const stream = served.client.responses.stream({ input: 'Name a colour', max_output_tokens: 6 });
    stream.on('response.output_text.delta', (event) => seen.push(event.delta));
    const final = await stream.finalResponse();
    expect(final.output_text).toBe(seen.join(''));
    const next = await served.client.responses.create({ input: 'Another?', previous_response_id: final.id, max_output_tokens: 4 });
    expect(next.usage!.input_tokens).toBeGreaterThan(final.usage!.input_tokens);
  });

  it('stores a stream its client cut as incomplete, billed for the tokens made', async () => {
    const controller = new AbortController();
    const stream = await served.client.responses.create({ input: 'Write a very long story', max_output_tokens: 4000, stream: true }, { signal: controller.signal });
    let id = '';
    let deltas = 0;
    try {
      for await (const event of stream) {
        if (event.type === 'response.created') id = event.response.id;
        if (event.type === 'response.output_text.delta' && ++deltas === 3) controller.abort();
      }
    } catch (error) {
      expect((error as Error).name).toMatch(/Abort/);
    }
    expect(id).toMatch(/^resp_/);
    await waitFor(async () => (await served.client.responses.retrieve(id).catch(() => null)) !== null, 10_000, 'the cut response stored');
    const stored = await served.client.responses.retrieve(id);
    expect(stored.status).toBe('incomplete');
    expect(stored.output_text.length).toBeGreaterThan(0);
    expect(stored.usage!.output_tokens).toBeGreaterThanOrEqual(3);
    expect(stored.usage!.output_tokens).toBeLessThan(4000);
    const rows = served.test.server.controlPlane.dataSource.getRepository(UsageRecord);
    await waitFor(async () => (await rows.countBy({ workspaceId: served.workspace.workspaceId, status: 'canceled' })) > 0, 5_000, 'the canceled usage record');
    const [record] = await rows.findBy({ workspaceId: served.workspace.workspaceId, status: 'canceled' });
    expect(record).toMatchObject({ endpoint: 'responses', stream: true, completionTokens: stored.usage!.output_tokens, promptTokens: stored.usage!.input_tokens });
  });
});
