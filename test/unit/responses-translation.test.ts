import { ChatStreamTranslator, chatAnswerToResult } from '../../control-plane/responses/chat-to-response';
import type { ResponseItem, ResponsesRequest } from '../../control-plane/responses/response-items';
import { itemsToMessages, responsesToChat } from '../../control-plane/responses/responses-to-chat';
import { parseResponsesRequest } from '../../control-plane/openai/responses-request';

const request = (fields: Record<string, unknown>): ResponsesRequest => parseResponsesRequest(Buffer.from(JSON.stringify(fields)));
const sse = (...chunks: unknown[]) => Buffer.from(chunks.map((chunk) => `data: ${JSON.stringify(chunk)}\n\n`).join('') + 'data: [DONE]\n\n');

describe('Responses ↔ chat translation', () => {
  it('turns function_call and function_call_output items into an assistant tool_calls turn and tool messages', () => {
    const items: ResponseItem[] = request({
      input: [
        { role: 'user', content: 'Weather in Paris and Rome?' },
        { type: 'message', role: 'assistant', content: [{ type: 'output_text', text: 'Checking.' }] },
        { type: 'function_call', call_id: 'call_1', name: 'weather', arguments: '{"city":"Paris"}' },
        { type: 'function_call', call_id: 'call_2', name: 'weather', arguments: '{"city":"Rome"}' },
        { type: 'function_call_output', call_id: 'call_1', output: '21' },
        { type: 'function_call_output', call_id: 'call_2', output: '25' },
        { type: 'function_call', call_id: 'call_3', name: 'weather', arguments: '{"city":"Oslo"}' },
      ],
    }).input;
    expect(itemsToMessages(items)).toEqual([
      { role: 'user', content: 'Weather in Paris and Rome?' },
      {
        role: 'assistant', content: 'Checking.', tool_calls: [
          { id: 'call_1', type: 'function', function: { name: 'weather', arguments: '{"city":"Paris"}' } },
          { id: 'call_2', type: 'function', function: { name: 'weather', arguments: '{"city":"Rome"}' } },
        ],
      },
      { role: 'tool', tool_call_id: 'call_1', content: '21' },
      { role: 'tool', tool_call_id: 'call_2', content: '25' },
      { role: 'assistant', content: null, tool_calls: [{ id: 'call_3', type: 'function', function: { name: 'weather', arguments: '{"city":"Oslo"}' } }] },
    ]);
  });

  it('maps settings, flat tools, tool_choice and text.format to chat fields, instructions first and the chain before the input', () => {
    const parsed = request({
      input: [{ role: 'user', content: [{ type: 'input_text', text: 'what is ' }, { type: 'input_image', image_url: 'data:image/png;base64,AAAA' }] }],
      instructions: 'Be brief.', max_output_tokens: 50, temperature: 0.5, top_p: 0.9, parallel_tool_calls: false,
      tools: [{ type: 'function', name: 'lookup', description: 'find', parameters: { type: 'object', properties: {} }, strict: true }],
      tool_choice: { type: 'function', name: 'lookup' },
      text: { format: { type: 'json_schema', name: 'answer', schema: { type: 'object' }, strict: true } },
      stream: true,
    });
    const history: ResponseItem[] = [
      { id: 'msg_1', type: 'message', role: 'user', content: [{ type: 'input_text', text: 'earlier' }] },
      { id: 'msg_2', type: 'message', role: 'assistant', status: 'completed', content: [{ type: 'output_text', text: 'yes', annotations: [] }] },
    ];
    expect(responsesToChat(parsed, history, 'm')).toEqual({
      model: 'm',
      messages: [
        { role: 'system', content: 'Be brief.' },
        { role: 'user', content: 'earlier' },
        { role: 'assistant', content: 'yes' },
        { role: 'user', content: [{ type: 'text', text: 'what is ' }, { type: 'image_url', image_url: { url: 'data:image/png;base64,AAAA', detail: 'auto' } }] },
      ],
      max_tokens: 50, temperature: 0.5, top_p: 0.9,
      tools: [{ type: 'function', function: { name: 'lookup', description: 'find', parameters: { type: 'object', properties: {} }, strict: true } }],
      tool_choice: { type: 'function', function: { name: 'lookup' } },
      parallel_tool_calls: false,
      response_format: { type: 'json_schema', json_schema: { name: 'answer', schema: { type: 'object' }, strict: true } },
      stream: true, stream_options: { include_usage: true },
    });
    expect(responsesToChat(request({ input: 'x', text: { format: { type: 'json_object' } } }), [], 'm')).toEqual({
      model: 'm', messages: [{ role: 'user', content: 'x' }], response_format: { type: 'json_object' },
    });
  });

  it('turns a chat answer with text and tool calls into message and function_call items, length into incomplete', () => {
    const result = chatAnswerToResult({
      choices: [{
        finish_reason: 'length',
        message: { role: 'assistant', content: 'Let me look.', tool_calls: [{ id: 'call_9', type: 'function', function: { name: 'lookup', arguments: '{"q":1}' } }] },
      }],
      usage: { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15, prompt_tokens_details: { cached_tokens: 4 } },
    });
    expect(result.status).toBe('incomplete');
    expect(result.incompleteDetails).toEqual({ reason: 'max_output_tokens' });
    expect(result.output).toEqual([
      { id: expect.stringMatching(/^msg_/), type: 'message', role: 'assistant', status: 'completed', content: [{ type: 'output_text', text: 'Let me look.', annotations: [] }] },
      { id: expect.stringMatching(/^fc_/), type: 'function_call', call_id: 'call_9', name: 'lookup', arguments: '{"q":1}', status: 'completed' },
    ]);
    expect(result.usage).toEqual({
      input_tokens: 10, input_tokens_details: { cached_tokens: 4 }, output_tokens: 5, output_tokens_details: { reasoning_tokens: 0 }, total_tokens: 15,
    });
    expect(chatAnswerToResult({ choices: [{ finish_reason: 'tool_calls', message: { content: null, tool_calls: [] } }] }).status).toBe('completed');
  });

  it('turns chat stream chunks, split anywhere, into typed events in order: text, then each tool call', () => {
    const translator = new ChatStreamTranslator();
    const bytes = sse(
      { choices: [{ index: 0, delta: { role: 'assistant', content: '' } }] },
      { choices: [{ index: 0, delta: { content: 'Hel' } }] },
      { choices: [{ index: 0, delta: { content: 'lo' } }] },
      { choices: [{ index: 0, delta: { tool_calls: [{ index: 0, id: 'call_a', type: 'function', function: { name: 'f', arguments: '{"a"' } }] } }] },
      { choices: [{ index: 0, delta: { tool_calls: [{ index: 0, function: { arguments: ':1}' } }] } }] },
      { choices: [{ index: 0, delta: { tool_calls: [{ index: 1, id: 'call_b', type: 'function', function: { name: 'g', arguments: '{}' } }] } }] },
      { choices: [{ index: 0, delta: {}, finish_reason: 'tool_calls' }] },
      { choices: [], usage: { prompt_tokens: 3, completion_tokens: 7, total_tokens: 10 } },
    );
    const events = [];
    for (let at = 0; at < bytes.length; at += 7) events.push(...translator.push(bytes.subarray(at, at + 7)));
    events.push(...translator.finish());
    expect(events.map((event) => event.type)).toEqual([
      'response.output_item.added', 'response.content_part.added', 'response.output_text.delta', 'response.output_text.delta',
      'response.output_text.done', 'response.content_part.done', 'response.output_item.done',
      'response.output_item.added', 'response.function_call_arguments.delta', 'response.function_call_arguments.delta',
      'response.function_call_arguments.done', 'response.output_item.done',
      'response.output_item.added', 'response.function_call_arguments.delta', 'response.function_call_arguments.done', 'response.output_item.done',
    ]);
    expect(events[4]).toMatchObject({ text: 'Hello', output_index: 0 });
    expect(events[10]).toMatchObject({ arguments: '{"a":1}', output_index: 1, name: 'f' });
    expect(translator.output).toEqual([
      expect.objectContaining({ type: 'message', status: 'completed', content: [{ type: 'output_text', text: 'Hello', annotations: [] }] }),
      expect.objectContaining({ type: 'function_call', call_id: 'call_a', name: 'f', arguments: '{"a":1}', status: 'completed' }),
      expect.objectContaining({ type: 'function_call', call_id: 'call_b', name: 'g', arguments: '{}', status: 'completed' }),
    ]);
    expect(translator.finishReason).toBe('tool_calls');
    expect(translator.usage).toMatchObject({ input_tokens: 3, output_tokens: 7, total_tokens: 10 });
  });

  it('closes a cut stream\'s open item as incomplete', () => {
    const translator = new ChatStreamTranslator();
    translator.push(sse({ choices: [{ index: 0, delta: { content: 'partial' } }] }).subarray(0, -14));
    const events = translator.finish(true);
    expect(events.at(-1)).toMatchObject({ type: 'response.output_item.done', item: { status: 'incomplete', content: [{ text: 'partial' }] } });
  });
});
