/**
 * vLLM and SGLang are started with the catalog's tool-call parser and structured-output backend
 * (providers/kubernetes/engine-container.ts); a model without a parser is started without tool
 * calling, and its requests with tools are refused before admission (pipeline/tool-support.ts).
 */
import { Catalog, type CatalogModel } from '../../control-plane/catalog/catalog';
import { AppError } from '../../control-plane/errors/app-error';
import { engineContainerFor } from '../../control-plane/providers/kubernetes/engine-container';
import { refuseToolsWithoutParser } from '../../control-plane/pipeline/tool-support';
import { OpenAiBatchLines } from '../../control-plane/openai/batch-lines';

const model = (overrides: Partial<CatalogModel> = {}): CatalogModel => ({
  id: 'acme/chat-1', name: 'Chat', modality: 'text', task: 'chat', engine: 'vllm', official: true, gpuMemoryGb: 24,
  inputModalities: ['text'], sizes: [], targetConcurrency: 32, ...overrides,
} as CatalogModel);

describe('tool-call parsers of vLLM and SGLang', () => {
  test('the engine command line carries the parser and the structured-output backend', () => {
    expect(engineContainerFor(model({ toolCallParser: 'hermes', structuredOutputBackend: 'xgrammar' }), 1, false, {})!.args.slice(-5)).toEqual([
      '--enable-auto-tool-choice', '--tool-call-parser', 'hermes', '--structured-outputs-config', '{"backend":"xgrammar"}',
    ]);
    expect(engineContainerFor(model({ engine: 'sglang', toolCallParser: 'qwen25', structuredOutputBackend: 'xgrammar' }), 1, false, {})!.args.slice(-4))
      .toEqual(['--tool-call-parser', 'qwen25', '--grammar-backend', 'xgrammar']);
    expect(engineContainerFor(model(), 1, false, {})!.args.join(' ')).not.toMatch(/tool|structured/);
  });

  test('the checked-in catalog states its chat models\' parsers, and only chat models may have one', () => {
    const catalog = Catalog.load();
    const llama = catalog.get('meta-llama/Llama-3.1-8B-Instruct');
    expect(llama.toolCallParser).toBe('llama3_json');
    expect(engineContainerFor(llama, 1, false, {})!.args).toEqual(expect.arrayContaining(['--enable-auto-tool-choice', '--tool-call-parser', 'llama3_json']));
    expect(() => catalog.register({ ...model({ task: 'completion' }), toolCallParser: 'hermes' })).toThrow(/toolCallParser/);
    expect(() => catalog.register({ ...model(), toolCallParser: 'Bad Parser' })).toThrow(/toolCallParser/);
  });

  test('a vLLM or SGLang model without a parser refuses tools naming the field; others pass', () => {
    const tools = [{ type: 'function', function: { name: 'f' } }];
    const refusal = (entry: CatalogModel, fields: Record<string, unknown>) => {
      try {
        refuseToolsWithoutParser(entry, fields);
        return null;
      } catch (error) {
        expect(error).toBeInstanceOf(AppError);
        return { code: (error as AppError).code, param: (error as AppError).param };
      }
    };
    for (const engine of ['vllm', 'sglang']) {
      expect(refusal(model({ engine }), { tools })).toEqual({ code: 'invalid_request', param: 'tools' });
      expect(refusal(model({ engine }), { tools, tool_choice: 'required' })).toEqual({ code: 'invalid_request', param: 'tools' });
      expect(refusal(model({ engine }), { tool_choice: 'auto' })).toEqual({ code: 'invalid_request', param: 'tool_choice' });
      expect(refusal(model({ engine }), { tools, tool_choice: 'none' })).toBeNull();
      expect(refusal(model({ engine }), { response_format: { type: 'json_object' } })).toBeNull();
      expect(refusal(model({ engine, toolCallParser: 'hermes' }), { tools })).toBeNull();
    }
    expect(refusal(model({ engine: 'llama-cpp' }), { tools })).toBeNull();
  });

  test('a batch line with tools for a model without a parser gets the same 400 a live call would', () => {
    const lines = new OpenAiBatchLines();
    const body = Buffer.from(JSON.stringify({ messages: [{ role: 'user', content: 'x' }], tools: [{ type: 'function', function: { name: 'f' } }] }));
    const refused = lines.check('/v1/chat/completions', model(), body);
    expect(refused.ok).toBe(false);
    if (refused.ok) return;
    expect(refused.response.statusCode).toBe(400);
    expect(JSON.parse(refused.response.body).error.param).toBe('tools');
    expect(lines.check('/v1/chat/completions', model({ toolCallParser: 'hermes' }), body).ok).toBe(true);
  });
});
