import { AppError } from '../../control-plane/errors/app-error';
import { capMessage, MAX_MESSAGE_CHARACTERS, quoteValue, shortened } from '../../control-plane/errors/quote-value';

const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

describe('quoting client values in error messages', () => {
  it.each([
    ['abc'], [''], [42], [3.5], [true], [null], [['a', 'b']], [[1, [2, [3]]]], [{ include_usage: 'yes' }], [{ a: { b: [1, 'c'] } }],
  ])('quotes a small value %j exactly as JSON', (value) => {
    expect(quoteValue(value)).toBe(JSON.stringify(value));
  });

  it('cuts a long string after about 100 characters and says how long it was', () => {
    const quoted = quoteValue('m'.repeat(100_000));
    expect(quoted).toBe(`"${'m'.repeat(99)}… (100000 characters)`);
  });

  it('cuts a 10,000-item array after about 100 characters and says how many items it had', () => {
    const quoted = quoteValue(Array.from({ length: 10_000 }, () => 'stop'));
    expect(quoted.length).toBeLessThan(130);
    expect(quoted).toMatch(/^\["stop","stop",.*… \(10000 items\)$/);
  });

  it('cuts huge and deeply nested objects without rendering them whole', () => {
    const wide = Object.fromEntries(Array.from({ length: 50_000 }, (_, index) => [`key${index}`, index]));
    let deep: unknown = 'bottom';
    for (let level = 0; level < 10_000; level++) deep = [deep];
    expect(quoteValue(wide)).toMatch(/^\{"key0":0,"key1":1,.*…$/);
    expect(quoteValue(wide).length).toBeLessThanOrEqual(101);
    expect(quoteValue(deep)).toBe('[[[[[[[[…');
  });

  it('never splits a surrogate pair', () => {
    for (let offset = 0; offset < 4; offset++) {
      const text = `${'a'.repeat(offset)}${'😀'.repeat(200)}`;
      expect(quoteValue(text)).not.toMatch(LONE_SURROGATE);
      expect(shortened(text)).not.toMatch(LONE_SURROGATE);
      expect(capMessage(`x ${text.repeat(10)} y`)).not.toMatch(LONE_SURROGATE);
    }
  });

  it('shortens text quoted by the message itself', () => {
    expect(shortened('gpt-4o')).toBe('gpt-4o');
    expect(shortened('x'.repeat(100))).toBe('x'.repeat(100));
    expect(shortened('x'.repeat(101))).toBe(`${'x'.repeat(100)}…`);
  });
});

describe('capping whole messages (the backstop)', () => {
  it('leaves messages of ordinary length alone, however they quote', () => {
    const message = `stop must be a string or an array of up to 4 strings, got "${'s'.repeat(500)}"`;
    expect(capMessage(message)).toBe(message);
  });

  it('cuts every long double-quoted literal of an oversized message (graphql-js quotes values whole)', () => {
    const value = 'X'.repeat(100_000);
    const message = `Variable "$g" got invalid value "${value}"; Value "${value}" does not exist in "EarningsGrouping" enum.`;
    const capped = capMessage(message);
    expect(capped).toBe(`Variable "$g" got invalid value "${'X'.repeat(100)}…"; Value "${'X'.repeat(100)}…" does not exist in "EarningsGrouping" enum.`);
  });

  it('keeps the head (the field) and the tail (what is allowed) of an oversized message without quotes', () => {
    const capped = capMessage(`model '${'m'.repeat(100_000)}' is not served here; this endpoint serves 'meta-llama/Llama-3.1-8B-Instruct'`);
    expect(capped.length).toBeLessThanOrEqual(MAX_MESSAGE_CHARACTERS);
    expect(capped).toMatch(/^model 'mmm/);
    expect(capped).toMatch(/ … m+' is not served here; this endpoint serves 'meta-llama\/Llama-3.1-8B-Instruct'$/);
  });

  it('applies to every AppError, whatever built its message', () => {
    const error = new AppError('invalid_request', `user must be a string, got ${JSON.stringify(['u'.repeat(70_000)])}`, { param: 'user' });
    expect(error.message.length).toBeLessThanOrEqual(MAX_MESSAGE_CHARACTERS);
    expect(error.message).toMatch(/^user must be a string, got \["u{100}…"\]$/);
  });
});
