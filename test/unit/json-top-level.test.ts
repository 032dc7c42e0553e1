import { NESTED, topLevelValues } from '../../gateway/http/json-top-level';

const NAMES = ['model', 'max_tokens', 'max_completion_tokens', 'n'] as const;
const scan = (text: string | Buffer) => {
  const found = topLevelValues(Buffer.isBuffer(text) ? text : Buffer.from(text), NAMES);
  return found === null ? null : Object.fromEntries(found);
};

/**
 * The shared endpoint's scan of a guest body: the top-level `model` and bounds, read as
 * JSON.parse reads them (last duplicate wins, escapes decoded, nested and quoted look-alikes
 * ignored), without building the body.
 */
describe('topLevelValues', () => {
  test.each<[string, string, Record<string, unknown> | null]>([
    ['a typical chat body', '{"model":"shared/a/b","messages":[{"role":"user","content":"hi"}],"max_tokens":32,"stream":true}', { model: 'shared/a/b', max_tokens: 32 }],
    ['white space everywhere', ' \n{ "model" :\t"m" , "n" : 2 }\r\n', { model: 'm', n: 2 }],
    ['a "model" key nested in messages does not count', '{"messages":[{"role":"user","model":"shared/evil"}],"model":"shared/real"}', { model: 'shared/real' }],
    ['a nested one after the real one does not override it', '{"model":"shared/real","metadata":{"model":"shared/evil","n":9}}', { model: 'shared/real' }],
    ['a "model" key inside a string does not count', '{"messages":[{"role":"user","content":"{\\"model\\":\\"shared/evil\\"}"}],"model":"shared/real"}', { model: 'shared/real' }],
    ['an escaped member name is the name it decodes to', '{"mod\\u0065l":"shared/x"}', { model: 'shared/x' }],
    ['an escaped value is decoded', '{"model":"shared\\/a\\u002Fb"}', { model: 'shared/a/b' }],
    ['a repeated name takes its last value, as JSON.parse does', '{"model":"shared/first","model":"shared/last"}', { model: 'shared/last' }],
    ['a string that ends in an escaped backslash', '{"content":"a\\\\","model":"m"}', { model: 'm' }],
    ['non-scalar values are marked, not built', '{"model":["x"],"n":{"a":1}}', { model: NESTED, n: NESTED }],
    ['literals and numbers', '{"model":null,"max_tokens":1e3,"n":-0.5,"max_completion_tokens":true}', { model: null, max_tokens: 1000, n: -0.5, max_completion_tokens: true }],
    ['an empty object', '{}', {}],
    ['no wanted member', '{"messages":[]}', {}],
    ['not an object', '[{"model":"m"}]', null],
    ['a top-level string', '"model"', null],
    ['trailing bytes', '{"model":"m"} x', null],
    ['an unterminated string', '{"model":"m', null],
    ['an unclosed array', '{"messages":[1,2', null],
    ['a bad literal', '{"model":nope}', null],
    ['a number JSON does not allow', '{"n":01}', null],
    ['a missing colon', '{"model" "m"}', null],
    ['a trailing comma', '{"model":"m",}', null],
    ['empty', '', null],
  ])('%s', (_name, text, expected) => {
    expect(scan(text)).toEqual(expected);
  });

  test('nesting deeper than 128 levels is refused unread (the parse then answers its 400)', () => {
    expect(scan(`{"model":"m","x":${'['.repeat(127)}${']'.repeat(127)}}`)).toEqual({ model: 'm' });
    expect(scan(`{"model":"m","x":${'['.repeat(128)}${']'.repeat(128)}}`)).toBeNull();
  });

  test('invalid UTF-8 in a value decodes as the full parse decodes it', () => {
    const body = Buffer.concat([Buffer.from('{"model":"a'), Buffer.from([0xff]), Buffer.from('b"}')]);
    expect(scan(body)).toEqual({ model: (JSON.parse(body.toString('utf8')) as { model: string }).model });
  });

  test('agrees with JSON.parse on generated bodies (shapes, escapes, duplicates, nesting)', () => {
    let seed = 7;
    const random = () => ((seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31) / 2 ** 31);
    const pick = <T>(list: readonly T[]): T => list[Math.floor(random() * list.length)];
    const strings = ['m', 'shared/a/b', 'x"y', 'back\\slash', 'uni\u00e9', 'model', '{"model":"z"}', ''];
    const value = (depth: number): unknown => {
      const kind = random();
      if (depth < 3 && kind < 0.2) return Array.from({ length: Math.floor(random() * 3) }, () => value(depth + 1));
      if (depth < 3 && kind < 0.4) return Object.fromEntries(Array.from({ length: Math.floor(random() * 3) }, () => [pick([...NAMES, 'other']), value(depth + 1)]));
      if (kind < 0.7) return pick(strings);
      return pick([0, 1, 32, -5, 2.5, 1e21, true, false, null]);
    };
    for (let index = 0; index < 2_000; index++) {
      const members = Array.from({ length: Math.floor(random() * 6) }, () => [pick([...NAMES, 'messages', 'stream']), value(0)] as const);
      // Duplicates on purpose: JSON.stringify of an object cannot make them, so join members by hand.
      let text = `{${members.map(([name, member]) => `${JSON.stringify(name)}:${JSON.stringify(member)}`).join(',')}}`;
      if (random() < 0.2) text = text.replace(/"model"/, '"mod\\u0065l"');
      const parsed = JSON.parse(text) as Record<string, unknown>;
      const expected: Record<string, unknown> = {};
      for (const name of NAMES) {
        if (!(name in parsed)) continue;
        const member = parsed[name];
        expected[name] = typeof member === 'object' && member !== null ? NESTED : member;
      }
      expect({ text, scanned: scan(text) }).toEqual({ text, scanned: expected });
    }
  });

  test('a 4 MB flat body is scanned in a few milliseconds', () => {
    const body = Buffer.from(JSON.stringify({ messages: [{ role: 'user', content: 'x'.repeat(4_000_000) }], model: 'shared/m', max_tokens: 5 }));
    const started = performance.now();
    expect(scan(body)).toEqual({ model: 'shared/m', max_tokens: 5 });
    expect(performance.now() - started).toBeLessThan(50);
  });
});
