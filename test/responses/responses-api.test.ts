import OpenAI from 'openai';
import { waitFor, deploymentForSuite } from '../support/test-server';
import { UsageRecord } from '../../control-plane/usage/usage-record.entity';
import { ResponseRecord } from '../../control-plane/responses/response-record.entity';

/** `POST /d/<slug>/v1/responses` and the stored responses, with the official SDK against real agents (built-in CPU engine). */
describe('the Responses API', () => {

  const storedCount = async () => served.test.server.controlPlane.dataSource.getRepository(ResponseRecord).count();
  const usageRecords = async (endpoint: string) => served.test.server.controlPlane.dataSource.getRepository(UsageRecord)
    .find({ where: { workspaceId: served.workspace.workspaceId, endpoint }, order: { id: 'ASC' } });

  const served = deploymentForSuite();

  it('creates a response from a string in OpenAI\'s shape, then retrieves, lists its input items and deletes it', async () => {
    const response = await served.client.responses.create({ model: served.modelId, input: 'Say hello to the platform', max_output_tokens: 12, metadata: { case: 'one' } });
    expect(response.id).toMatch(/^resp_/);
    expect(response.object).toBe('response');
    expect(response.model).toBe(served.modelId);
    expect(['completed', 'incomplete']).toContain(response.status);
    if (response.status === 'incomplete') expect(response.incomplete_details).toEqual({ reason: 'max_output_tokens' });
    expect(response.output).toHaveLength(1);
    const message = response.output[0] as OpenAI.Responses.ResponseOutputMessage;
    expect(message).toMatchObject({ type: 'message', role: 'assistant' });
    expect(message.id).toMatch(/^msg_/);
    expect(message.content[0]).toMatchObject({ type: 'output_text', annotations: [] });
    expect(response.output_text.length).toBeGreaterThan(0);
    expect(response.output_text).toBe((message.content[0] as OpenAI.Responses.ResponseOutputText).text);
    expect(response.usage!.input_tokens).toBeGreaterThan(0);
    expect(response.usage!.output_tokens).toBeGreaterThan(0);
    expect(response.usage!.output_tokens).toBeLessThanOrEqual(12);
    expect(response.usage!.total_tokens).toBe(response.usage!.input_tokens + response.usage!.output_tokens);
    expect(response.usage!.input_tokens_details.cached_tokens).toBeGreaterThanOrEqual(0);
    expect(response.usage!.output_tokens_details.reasoning_tokens).toBe(0);
    expect(response).toMatchObject({
      store: true, metadata: { case: 'one' }, max_output_tokens: 12, previous_response_id: null, truncation: 'disabled', error: null,
      parallel_tool_calls: true, tool_choice: 'auto', tools: [], text: { format: { type: 'text' } }, instructions: null,
    });

    const retrieved = await served.client.responses.retrieve(response.id);
    expect(retrieved).toEqual(response);

    const items = await served.client.responses.inputItems.list(response.id);
    expect(items.data).toHaveLength(1);
    expect(items.data[0]).toMatchObject({ type: 'message', role: 'user', content: [{ type: 'input_text', text: 'Say hello to the platform' }] });

    const deleted = await served.client.responses.delete(response.id);
    expect(deleted).toEqual({ id: response.id, object: 'response', deleted: true });
    await expect(served.client.responses.retrieve(response.id)).rejects.toMatchObject({ status: 404 });
    await expect(served.client.responses.delete(response.id)).rejects.toMatchObject({ status: 404 });
  });

  it('takes input items (text and image parts, instructions) and pages input_items', async () => {
    const response = await served.client.responses.create({
      model: served.modelId, instructions: 'You are terse.', max_output_tokens: 5,
      input: [
        { role: 'user', content: 'first' },
        { type: 'message', role: 'assistant', content: [{ type: 'output_text', text: 'ok' }] } as OpenAI.Responses.ResponseInputItem,
        { role: 'user', content: [{ type: 'input_text', text: 'look at this' }, { type: 'input_image', image_url: 'https://example.com/cat.png', detail: 'low' }] },
      ],
    });
    expect(response.instructions).toBe('You are terse.');
    const all = await served.client.responses.inputItems.list(response.id, { order: 'asc' });
    expect(all.data.map((item) => (item as { role: string }).role)).toEqual(['user', 'assistant', 'user']);
    const first = await served.client.responses.inputItems.list(response.id, { order: 'asc', limit: 2 });
    expect(first.data).toHaveLength(2);
    expect(first.has_more).toBe(true);
    expect(first.data[1].id).toBe(all.data[1].id);
    const raw = await (await fetch(`${served.deployment.baseUrl}/responses/${response.id}/input_items?order=asc&limit=2`, { headers: { authorization: `Bearer ${served.workspace.apiKey}` } })).json();
    expect(raw).toMatchObject({ object: 'list', first_id: all.data[0].id, last_id: all.data[1].id, has_more: true });
    const rest = await served.client.responses.inputItems.list(response.id, { order: 'asc', after: raw.last_id });
    expect(rest.data.map((item) => item.id)).toEqual([all.data[2].id]);
    expect(rest.has_more).toBe(false);
  });

  it('continues a chain by previous_response_id: the next turn\'s prompt holds the earlier turns', async () => {
    const first = await served.client.responses.create({ model: served.modelId, input: 'Remember the word apricot', max_output_tokens: 6 });
    const second = await served.client.responses.create({ model: served.modelId, input: 'Which word?', previous_response_id: first.id, max_output_tokens: 6 });
    expect(second.previous_response_id).toBe(first.id);
    expect(second.usage!.input_tokens).toBeGreaterThan(first.usage!.input_tokens + first.usage!.output_tokens);
    // A turn's input_items are its own input.
    const items = await served.client.responses.inputItems.list(second.id);
    expect(items.data).toHaveLength(1);
  });

  it('store: false is answered but neither retrievable nor chainable', async () => {
    const before = await storedCount();
    const response = await served.client.responses.create({ model: served.modelId, input: 'not kept', store: false, max_output_tokens: 4 });
    expect(response.store).toBe(false);
    expect(await storedCount()).toBe(before);
    await expect(served.client.responses.retrieve(response.id)).rejects.toMatchObject({ status: 404 });
    await expect(served.client.responses.create({ model: served.modelId, input: 'next', previous_response_id: response.id }))
      .rejects.toMatchObject({ status: 400, param: 'previous_response_id' });
  });

  it('another workspace gets 404 for the response and 400 for chaining it', async () => {
    const response = await served.client.responses.create({ model: served.modelId, input: 'mine', max_output_tokens: 4 });
    const other = await served.test.createWorkspace();
    const otherDeployment = await served.test.createDeployment(other);
    const otherClient = new OpenAI({ baseURL: otherDeployment.baseUrl, apiKey: other.apiKey, maxRetries: 0 });
    await expect(otherClient.responses.retrieve(response.id)).rejects.toMatchObject({ status: 404 });
    await expect(otherClient.responses.delete(response.id)).rejects.toMatchObject({ status: 404 });
    await expect(otherClient.responses.inputItems.list(response.id)).rejects.toMatchObject({ status: 404 });
    // Its key on this deployment's URL: the deployment itself is not found.
    const intruder = new OpenAI({ baseURL: served.deployment.baseUrl, apiKey: other.apiKey, maxRetries: 0 });
    await expect(intruder.responses.retrieve(response.id)).rejects.toMatchObject({ status: 404 });
    await served.test.waitForReplicas(otherDeployment.id, 1);
    await expect(otherClient.responses.create({ model: served.modelId, input: 'steal', previous_response_id: response.id }))
      .rejects.toMatchObject({ status: 400, param: 'previous_response_id' });
    expect((await served.client.responses.retrieve(response.id)).id).toBe(response.id);
  });

  it('passes function tools, tool_choice and text.format through, validated and echoed', async () => {
    const tools: OpenAI.Responses.FunctionTool[] = [{
      type: 'function', name: 'get_weather', description: 'Weather of a city', strict: true,
      parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'], additionalProperties: false },
    }];
    const response = await served.client.responses.create({
      model: served.modelId, max_output_tokens: 8, tools, tool_choice: { type: 'function', name: 'get_weather' }, parallel_tool_calls: false,
      input: [
        { role: 'user', content: 'Weather in Paris?' },
        { type: 'function_call', call_id: 'call_1', name: 'get_weather', arguments: '{"city":"Paris"}' },
        { type: 'function_call_output', call_id: 'call_1', output: '{"celsius":21}' },
      ],
    });
    expect(response.tools).toEqual(tools);
    expect(response.tool_choice).toEqual({ type: 'function', name: 'get_weather' });
    expect(response.parallel_tool_calls).toBe(false);
    const items = await served.client.responses.inputItems.list(response.id, { order: 'asc' });
    expect(items.data.map((item) => item.type)).toEqual(['message', 'function_call', 'function_call_output']);
    expect(items.data[1]).toMatchObject({ call_id: 'call_1', name: 'get_weather', arguments: '{"city":"Paris"}' });

    const schema = await served.client.responses.create({
      model: served.modelId, input: 'a city', max_output_tokens: 8,
      text: { format: { type: 'json_schema', name: 'city', schema: { type: 'object', properties: { name: { type: 'string' } } }, strict: false } },
    });
    expect(schema.text.format).toEqual({ type: 'json_schema', name: 'city', schema: { type: 'object', properties: { name: { type: 'string' } } }, strict: false });
  });

  it('meters and settles a response exactly as chat for the same prompt and tokens', async () => {
    const prompt = 'Count the replicas of the cluster';
    const chatsBefore = (await usageRecords('chat.completions')).length;
    const responsesBefore = (await usageRecords('responses')).length;
    const chat = await served.client.chat.completions.create({ model: served.modelId, messages: [{ role: 'user', content: prompt }], max_tokens: 9 });
    const response = await served.client.responses.create({ model: served.modelId, input: prompt, max_output_tokens: 9, store: false });
    expect(response.usage!.input_tokens).toBe(chat.usage!.prompt_tokens);
    expect(response.usage!.output_tokens).toBe(chat.usage!.completion_tokens);
    expect(response.output_text).toBe(chat.choices[0].message.content);
    // The records of these two calls, found by their tokens among the new ones: usage is written in
    // batches, so an earlier test's record may land after them (and take a higher id).
    const ours = async (endpoint: string, before: number) => (await usageRecords(endpoint)).slice(before)
      .find((record) => record.promptTokens === chat.usage!.prompt_tokens && record.completionTokens === chat.usage!.completion_tokens);
    await waitFor(async () => (await ours('responses', responsesBefore)) !== undefined && (await ours('chat.completions', chatsBefore)) !== undefined,
      5_000, 'both usage records');
    const chatRecord = (await ours('chat.completions', chatsBefore))!;
    const responseRecord = (await ours('responses', responsesBefore))!;
    expect({ ...responseRecord, id: 0, endpoint: '', latencyMs: 0, createdAt: null }).toEqual({ ...chatRecord, id: 0, endpoint: '', latencyMs: 0, createdAt: null });
    expect(responseRecord.status).toBe('succeeded');
  });

  it('refuses each malformed field with a 400 naming it, and stores nothing', async () => {
    const before = await storedCount();
    const bad: [Record<string, unknown>, string][] = [
      [{ input: 42 }, 'input'],
      [{ input: [] }, 'input'],
      [{ input: [{ role: 'robot', content: 'x' }] }, 'input[0].role'],
      [{ input: [{ role: 'user', content: [{ type: 'input_audio' }] }] }, 'input[0].content[0].type'],
      [{ input: [{ role: 'user', content: [{ type: 'input_image', image_url: 'ftp://x' }] }] }, 'input[0].content[0].image_url'],
      [{ input: [{ type: 'function_call', name: 'f', arguments: '{}' }] }, 'input[0].call_id'],
      [{ input: [{ type: 'function_call_output', call_id: 'c', output: 5 }] }, 'input[0].output'],
      [{ input: [{ type: 'reasoning' }] }, 'input[0].type'],
      [{ input: 'x', instructions: 3 }, 'instructions'],
      [{ input: 'x', store: 'yes' }, 'store'],
      [{ input: 'x', max_output_tokens: 0 }, 'max_output_tokens'],
      [{ input: 'x', temperature: 3 }, 'temperature'],
      [{ input: 'x', top_p: -1 }, 'top_p'],
      [{ input: 'x', tools: [{ type: 'web_search' }] }, 'tools[0].type'],
      [{ input: 'x', tools: [{ type: 'function', name: 'bad name!' }] }, 'tools[0].name'],
      [{ input: 'x', tools: [{ type: 'function', name: 'f', parameters: { type: 'string' } }] }, 'tools[0].parameters'],
      [{ input: 'x', tools: [{ type: 'function', name: 'f' }], tool_choice: { type: 'function', name: 'g' } }, 'tool_choice.name'],
      [{ input: 'x', tool_choice: 'sometimes' }, 'tool_choice'],
      [{ input: 'x', parallel_tool_calls: 1 }, 'parallel_tool_calls'],
      [{ input: 'x', text: { format: { type: 'yaml' } } }, 'text.format.type'],
      [{ input: 'x', text: { format: { type: 'json_schema', name: 'n', schema: 'no' } } }, 'text.format.schema'],
      [{ input: 'x', text: { format: { type: 'json_schema', name: 'bad name', schema: {} } } }, 'text.format.name'],
      [{ input: 'x', tools: [{ type: 'function', name: 'f', parameters: { type: 'object', not: {} } }] }, 'tools[0].parameters.not'],
      [{ input: 'x', text: { format: { type: 'json_schema', name: 'n', schema: { type: 'object', if: {} } } } }, 'text.format.schema.if'],
      [{ input: 'x', stream: true, stream_options: { include_obfuscation: true } }, 'stream_options.include_obfuscation'],
      [{ input: 'x', metadata: Object.fromEntries(Array.from({ length: 17 }, (_, index) => [`k${index}`, 'v'])) }, 'metadata'],
      [{ input: 'x', metadata: { key: 1 } }, 'metadata.key'],
      [{ input: 'x', truncation: 'sometimes' }, 'truncation'],
      [{ input: 'x', truncation: 'auto' }, 'truncation'],
      [{ input: 'x', previous_response_id: 'resp_missing' }, 'previous_response_id'],
      [{ input: 'x', model: 'some-other-model' }, 'model'],
      [{ input: 'x', include: ['file_search_call.results'] }, 'include[0]'],
      [{ input: 'x', reasoning: { effort: 'high' } }, 'reasoning.effort'],
      [{ input: 'x', prompt_cache_key: 'k' }, 'prompt_cache_key'],
    ];
    for (const [body, param] of bad) {
      const error = await served.client.responses.create(body as never).then(() => null, (caught: unknown) => caught);
      expect({ param, status: (error as { status?: number })?.status, got: (error as { param?: string })?.param }).toEqual({ param, status: 400, got: param });
      expect((error as { type?: string }).type).toBe('invalid_request_error');
    }
    expect(await storedCount()).toBe(before);
    await expect(served.client.responses.inputItems.list('resp_x', { limit: 1000 })).rejects.toMatchObject({ status: 400, param: 'limit' });
  });
});
