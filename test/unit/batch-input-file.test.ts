import { readInputFile, MAX_LISTED_ERRORS, type InputFileRules } from '../../control-plane/batches/batch-input-file';

const MODEL = 'meta-llama/Llama-3.1-8B-Instruct';
const rules = (overrides: Partial<InputFileRules> = {}): InputFileRules => ({
  endpoint: '/v1/chat/completions', modelId: MODEL, maxLines: 100, maxLineBytes: 1_000,
  check: (body) => (body.includes('"max_tokens":-1') ? { ok: false, response: { statusCode: 400, body: '{"error":{}}' } } : { ok: true, fields: JSON.parse(body.toString()) }),
  ...overrides,
});
const line = (customId: string, body: Record<string, unknown> = { messages: [{ role: 'user', content: 'hi' }] }) =>
  JSON.stringify({ custom_id: customId, method: 'POST', url: '/v1/chat/completions', body });
const file = (...lines: string[]) => Buffer.from(lines.join('\n'));

/** The file rules of a batch's input (OpenAI's), before anything runs. */
describe('readInputFile', () => {
  it('reads each request with its line, skipping blank lines and CRLF endings; a body the endpoint refuses is a line answer, not a file error', async () => {
    const result = await readInputFile(Buffer.from(`${line('a')}\r\n\n${line('b', { max_tokens: -1, messages: [] })}\n${line('c', { model: MODEL, messages: [] })}\n`), rules());
    expect(result.errors).toEqual([]);
    expect(result.lines.map((entry) => [entry.index, entry.customId, entry.check.ok])).toEqual([[0, 'a', true], [2, 'b', false], [3, 'c', true]]);
    expect(JSON.parse(result.lines[0].body)).toEqual({ messages: [{ role: 'user', content: 'hi' }] });
  });

  it('names every broken line (from 1) and keeps no line of a broken file', async () => {
    const result = await readInputFile(file(
      line('ok'), 'not json', '[1]', JSON.stringify({ method: 'POST', url: '/v1/chat/completions', body: {} }), line('ok'),
      JSON.stringify({ custom_id: 'm', method: 'PUT', url: '/v1/chat/completions', body: {} }),
      JSON.stringify({ custom_id: 'u', method: 'POST', url: '/v1/completions', body: {} }),
      JSON.stringify({ custom_id: 'b', method: 'POST', url: '/v1/chat/completions', body: 'text' }),
      line('model', { model: 'other/model', messages: [] }),
      JSON.stringify({ custom_id: 'x'.repeat(600), method: 'POST', url: '/v1/chat/completions', body: {} }),
      JSON.stringify({ custom_id: 'nul\u0000', method: 'POST', url: '/v1/chat/completions', body: {} }),
      line('big', { messages: [{ role: 'user', content: 'x'.repeat(2_000) }] }),
    ), rules());
    expect(result.lines).toEqual([]);
    expect(result.errors.map((error) => [error.line, error.code])).toEqual([
      [2, 'invalid_json_line'], [3, 'invalid_json_line'], [4, 'missing_custom_id'], [5, 'duplicate_custom_id'], [6, 'invalid_method'],
      [7, 'invalid_url'], [8, 'invalid_body'], [9, 'mismatched_model'], [10, 'invalid_custom_id'], [11, 'invalid_custom_id'], [12, 'line_too_large'],
    ]);
  });

  it('refuses an empty file and one over the line limit, and lists at most the first problems', async () => {
    expect((await readInputFile(Buffer.from('\n \n'), rules())).errors).toEqual([expect.objectContaining({ code: 'empty_file', line: null })]);
    const tooMany = await readInputFile(file(...Array.from({ length: 4 }, (_, index) => line(`l${index}`))), rules({ maxLines: 3 }));
    expect(tooMany.errors).toEqual([expect.objectContaining({ code: 'too_many_lines', line: null })]);
    const broken = await readInputFile(file(...Array.from({ length: MAX_LISTED_ERRORS + 5 }, () => 'nope')), rules({ maxLines: 1_000 }));
    expect(broken.errors).toHaveLength(MAX_LISTED_ERRORS + 1);
    expect(broken.errors[MAX_LISTED_ERRORS]).toMatchObject({ code: 'too_many_errors', message: expect.stringContaining('5 more') });
  });
});
