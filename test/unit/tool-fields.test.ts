import { z } from 'zod';
import { zodFunction, zodResponseFormat } from 'openai/helpers/zod';
import { AppError } from '../../control-plane/errors/app-error';
import { parseTextRequest } from '../../control-plane/openai/text-request';

const messages = [{ role: 'user', content: 'hi' }];
const weather = { type: 'function', function: { name: 'get_weather', description: 'weather of a city', parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } } };
const time = { type: 'function', function: { name: 'get_time' } };

function refusal(body: Record<string, unknown>): { param: unknown; message: string } {
  try {
    parseTextRequest(Buffer.from(JSON.stringify({ messages, ...body })), 'chat.completions');
  } catch (error) {
    expect(error).toBeInstanceOf(AppError);
    expect((error as AppError).code).toBe('invalid_request');
    return { param: (error as AppError).param, message: (error as AppError).message };
  }
  throw new Error(`accepted ${JSON.stringify(body)}`);
}

function accepts(body: Record<string, unknown>): void {
  expect(() => parseTextRequest(Buffer.from(JSON.stringify({ messages, ...body })), 'chat.completions')).not.toThrow();
}

describe('chat tool and structured-output fields', () => {
  it('accepts what the stock clients send', () => {
    const Item = z.object({ name: z.string(), qty: z.number().int() });
    accepts({ tools: [zodFunction({ name: 'add_item', parameters: Item }), weather, time], tool_choice: 'auto', parallel_tool_calls: true });
    accepts({ tools: [weather], tool_choice: 'required' });
    accepts({ tools: [weather], tool_choice: { type: 'function', function: { name: 'get_weather' } } });
    accepts({ tools: [weather], tool_choice: 'none' });
    accepts({ tool_choice: 'none' });
    accepts({ tool_choice: 'auto' });
    accepts({ response_format: zodResponseFormat(Item, 'item') });
    accepts({ response_format: { type: 'json_object' } });
    accepts({ response_format: { type: 'text' } });
    accepts({ logprobs: true, top_logprobs: 20 });
    accepts({ logprobs: false });
    accepts({ tools: null, tool_choice: null, response_format: null, logprobs: null });
  });

  it.each([
    [{ tools: {} }, 'tools', 'array of tools'],
    [{ tools: [5] }, 'tools[0]', 'a tool'],
    [{ tools: [{ type: 'custom', function: { name: 'a' } }] }, 'tools[0].type', '"function"'],
    [{ tools: [{ type: 'function' }] }, 'tools[0].function', 'required'],
    [{ tools: [{ type: 'function', function: { name: 'bad name!' } }] }, 'tools[0].function.name', '^[a-zA-Z0-9_-]{1,64}$'],
    [{ tools: [{ type: 'function', function: { name: 'a'.repeat(65) } }] }, 'tools[0].function.name', '1 to 64'],
    [{ tools: [{ type: 'function', function: {} }] }, 'tools[0].function.name', 'required'],
    [{ tools: [weather, { type: 'function', function: { name: 'get_weather' } }] }, 'tools[1].function.name', 'unique'],
    [{ tools: [{ type: 'function', function: { name: 'a', description: 5 } }] }, 'tools[0].function.description', 'string'],
    [{ tools: [{ type: 'function', function: { name: 'a', strict: 'yes' } }] }, 'tools[0].function.strict', 'boolean'],
    [{ tools: [{ type: 'function', function: { name: 'a', parameters: [] } }] }, 'tools[0].function.parameters', 'JSON Schema object'],
    [{ tools: [{ type: 'function', function: { name: 'a', parameters: { type: 'object', properties: { x: { type: 'string', if: {} } } } } }] },
      'tools[0].function.parameters.properties.x.if', '"if"'],
    [{ tools: [{ type: 'function', function: { name: 'a', parameters: { type: 'object', properties: { x: { anyOf: [{ type: 'sting' }] } } } } }] },
      'tools[0].function.parameters.properties.x.anyOf[0].type', 'must be one of'],
    [{ tools: [{ type: 'function', function: { name: 'a', return: {} } }] }, 'tools[0].function.return', 'not supported'],
    [{ tools: [{ type: 'function', function: { name: 'a' }, cache: true }] }, 'tools[0].cache', 'not supported'],
    [{ tool_choice: 'always' }, 'tool_choice', '"none", "auto", "required"'],
    [{ tool_choice: 'required' }, 'tool_choice', 'lists no tools'],
    [{ tool_choice: 5 }, 'tool_choice', 'must be'],
    [{ tool_choice: { type: 'function', function: { name: 'get_weather' } } }, 'tool_choice.function.name', 'lists no tools'],
    [{ tools: [weather], tool_choice: { type: 'function', function: { name: 'get_time' } } }, 'tool_choice.function.name', 'get_weather'],
    [{ tools: [weather], tool_choice: { type: 'function' } }, 'tool_choice.function', 'required'],
    [{ tools: [weather], tool_choice: { type: 'tool', function: { name: 'get_weather' } } }, 'tool_choice.type', '"function"'],
    [{ tools: [weather], tool_choice: { type: 'function', function: { name: 'bad name!' } } }, 'tool_choice.function.name', '^[a-zA-Z0-9_-]{1,64}$'],
    [{ parallel_tool_calls: 'no' }, 'parallel_tool_calls', 'boolean'],
    [{ response_format: 'json' }, 'response_format', 'must be'],
    [{ response_format: { type: 'xml' } }, 'response_format.type', '"json_schema"'],
    [{ response_format: { type: 'json_object', schema: {} } }, 'response_format.schema', 'not supported'],
    [{ response_format: { type: 'json_schema' } }, 'response_format.json_schema', 'required'],
    [{ response_format: { type: 'json_schema', json_schema: { schema: { type: 'object' } } } }, 'response_format.json_schema.name', 'required'],
    [{ response_format: { type: 'json_schema', json_schema: { name: 'my schema', schema: { type: 'object' } } } }, 'response_format.json_schema.name', '1 to 64'],
    [{ response_format: { type: 'json_schema', json_schema: { name: 'x' } } }, 'response_format.json_schema.schema', 'required'],
    [{ response_format: { type: 'json_schema', json_schema: { name: 'x', schema: true } } }, 'response_format.json_schema.schema', 'JSON Schema object'],
    [{ response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'object', patternProperties: {} } } } },
      'response_format.json_schema.schema.patternProperties', '"patternProperties"'],
    [{ response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { $ref: 'https://example.com/s.json' } } } },
      'response_format.json_schema.schema.$ref', 'point into this schema'],
    [{ response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'object' }, strict: 1 } } }, 'response_format.json_schema.strict', 'boolean'],
    [{ response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'object' }, format: 'y' } } }, 'response_format.json_schema.format', 'not supported'],
    [{ logprobs: 1 }, 'logprobs', 'boolean'],
    [{ logprobs: true, top_logprobs: 21 }, 'top_logprobs', '0 to 20'],
    [{ logprobs: true, top_logprobs: -1 }, 'top_logprobs', '0 to 20'],
    [{ logprobs: true, top_logprobs: 1.5 }, 'top_logprobs', 'integer'],
    [{ top_logprobs: 2 }, 'top_logprobs', 'only allowed when logprobs is true'],
    [{ logprobs: false, top_logprobs: 2 }, 'top_logprobs', 'only allowed when logprobs is true'],
  ])('refuses %j naming %s', (body, param, message) => {
    const refused = refusal(body);
    expect(refused.param).toBe(param);
    expect(refused.message).toContain(message);
  });

  it('leaves completions alone: its logprobs is an integer', () => {
    expect(() => parseTextRequest(Buffer.from(JSON.stringify({ prompt: 'a', logprobs: 2 })), 'completions')).not.toThrow();
  });
});
