import { readInputFile, MAX_LISTED_ERRORS, type InputFileRules } from '../../control-plane/batches/batch-input-file';
import { WorkSlices } from '../../control-plane/batches/work-slices';

const MODEL = 'meta-llama/Llama-3.1-8B-Instruct';
const rules = (overrides: Partial<InputFileRules> = {}): InputFileRules => ({
  endpoint: '/v1/chat/completions', modelId: MODEL, maxLines: 100, maxLineBytes: 1_000,
  check: (body) => (body.includes('"max_tokens":-1') ? { ok: false, response: { statusCode: 400, body: '{"error":{}}' } } : { ok: true, fields: JSON.parse(body.toString()) }),
  ...overrides,
});
const line = (customId: string, body: Record<string, unknown> = { messages: [{ role: 'user', content: 'hi' }] }) =>
  JSON.stringify({ custom_id: customId, method: 'POST', url: '/v1/chat/completions', body });
const file = (...lines: string[]) => Buffer.from(lines.join('\n'));

/** The file as an object store streams it: in chunks that cut lines anywhere. */
async function* chunks(data: Buffer, size = 7): AsyncGenerator<Buffer> {
  for (let start = 0; start < data.length; start += size) yield data.subarray(start, start + size);
}
const read = (data: Buffer, overrides: Partial<InputFileRules> = {}, size?: number) => readInputFile(chunks(data, size), rules(overrides), new WorkSlices());

/** The file rules of a batch's input (OpenAI's), before anything runs. */
describe('readInputFile', () => {
  it('reads each request with its line and where its body lies, skipping blank lines and CRLF endings; a body the endpoint refuses is a line answer, not a file error', async () => {
    const data = Buffer.from(`${line('a')}\r\n\n${line('b', { max_tokens: -1, messages: [] })}\n  \n${line('c', { model: MODEL, messages: [] })}\n`);
    for (const size of [1, 7, 64 * 1024]) {
      const result = await read(data, {}, size);
      expect(result.errors).toEqual([]);
      const { lines } = result;
      expect(lines.indexes).toEqual([0, 2, 4]);
      expect(lines.customIds).toEqual(['a', 'b', 'c']);
      const bodies = lines.indexes.map((_, at) => data.subarray(lines.bodyOffsets[at], lines.bodyOffsets[at] + lines.bodyLengths[at]).toString());
      expect(bodies.map((body) => JSON.parse(body))).toEqual([{ messages: [{ role: 'user', content: 'hi' }] }, { max_tokens: -1, messages: [] }, { model: MODEL, messages: [] }]);
      expect([...lines.refused.keys()]).toEqual([2]);
      expect(lines.refused.get(2)).toEqual({ customId: 'b', response: { statusCode: 400, body: '{"error":{}}' } });
    }
  });

  it('takes the body JSON.parse takes: the last of a repeated `body`, names with escapes, whatever the members around it hold', async () => {
    const text = '{"body":{"messages":[]},"custom_id":"x","method":"POST","url":"/v1/chat/completions","bod\\u0079":{"messages":[{"role":"user","content":"}]\\"{"}],"stop":[1,[2],"]"]},"z":[1,[2]]}';
    const { lines, errors } = await read(Buffer.from(text), { maxLineBytes: 10_000 });
    expect(errors).toEqual([]);
    const body = text.slice(lines.bodyOffsets[0], lines.bodyOffsets[0] + lines.bodyLengths[0]);
    expect(JSON.parse(body)).toEqual(JSON.parse(text).body);
  });

  it('names every broken line (from 1) and keeps no line of a broken file', async () => {
    const result = await read(file(
      line('ok'), 'not json', '[1]', JSON.stringify({ method: 'POST', url: '/v1/chat/completions', body: {} }), line('ok'),
      JSON.stringify({ custom_id: 'm', method: 'PUT', url: '/v1/chat/completions', body: {} }),
      JSON.stringify({ custom_id: 'u', method: 'POST', url: '/v1/completions', body: {} }),
      JSON.stringify({ custom_id: 'b', method: 'POST', url: '/v1/chat/completions', body: 'text' }),
      line('model', { model: 'other/model', messages: [] }),
      JSON.stringify({ custom_id: 'x'.repeat(600), method: 'POST', url: '/v1/chat/completions', body: {} }),
      JSON.stringify({ custom_id: 'nul\u0000', method: 'POST', url: '/v1/chat/completions', body: {} }),
      line('big', { messages: [{ role: 'user', content: 'x'.repeat(2_000) }] }),
    ));
    expect(result.lines.count).toBe(0);
    expect(result.errors.map((error) => [error.line, error.code])).toEqual([
      [2, 'invalid_json_line'], [3, 'invalid_json_line'], [4, 'missing_custom_id'], [5, 'duplicate_custom_id'], [6, 'invalid_method'],
      [7, 'invalid_url'], [8, 'invalid_body'], [9, 'mismatched_model'], [10, 'invalid_custom_id'], [11, 'invalid_custom_id'], [12, 'line_too_large'],
    ]);
  });

  it('refuses a line nesting past 128 levels by its scan, naming the line, without parsing it', async () => {
    const deep = `{"custom_id":"deep","method":"POST","url":"/v1/chat/completions","body":{"stop":${'['.repeat(200)}${']'.repeat(200)}}}`;
    const result = await read(file(line('ok'), deep), { maxLineBytes: 10_000 });
    expect(result.errors).toEqual([expect.objectContaining({ line: 2, code: 'invalid_json_line', message: expect.stringContaining('more than 128 levels deep') })]);
  });

  it('refuses an empty file and one over the line limit, and lists at most the first problems', async () => {
    expect((await read(Buffer.from('\n \n'))).errors).toEqual([expect.objectContaining({ code: 'empty_file', line: null })]);
    const tooMany = await read(file(...Array.from({ length: 4 }, (_, index) => line(`l${index}`))), { maxLines: 3 });
    expect(tooMany.errors).toEqual([expect.objectContaining({ code: 'too_many_lines', line: null })]);
    const broken = await read(file(...Array.from({ length: MAX_LISTED_ERRORS + 5 }, () => 'nope')), { maxLines: 1_000 });
    expect(broken.errors).toHaveLength(MAX_LISTED_ERRORS + 1);
    expect(broken.errors[MAX_LISTED_ERRORS]).toMatchObject({ code: 'too_many_errors', message: expect.stringContaining('5 more') });
  });

  it('gives the event loop a turn whenever a slice has used its budget, however few lines that was', async () => {
    // A clock that moves 4 ms per line read: a 10 ms budget is used every third line.
    let clock = 0;
    const slices = new WorkSlices(10, () => clock);
    const lines = Array.from({ length: 30 }, (_, index) => line(`l${index}`));
    const result = await readInputFile(chunks(file(...lines, ''), 64 * 1024), rules({ check: (body) => { clock += 4; return { ok: true, fields: JSON.parse(body.toString()) }; } }), slices);
    expect(result.lines.count).toBe(30);
    expect(slices.yields).toBe(10);
    expect(slices.longestSliceMs).toBe(12);
  });
});
