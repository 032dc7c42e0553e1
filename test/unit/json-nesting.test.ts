import fc from 'fast-check';
import { JsonNestingError, MAX_JSON_CONTAINERS, MAX_JSON_DEPTH, nestsDeeperThan, parseJsonText } from '../../common/json-nesting';

/** Depth of a parsed value: what the scan must agree with, without building anything. */
function depthOf(value: unknown): number {
  if (Array.isArray(value)) return 1 + Math.max(0, ...value.map(depthOf));
  if (value && typeof value === 'object') return 1 + Math.max(0, ...Object.values(value).map(depthOf));
  return 0;
}

describe('nestsDeeperThan', () => {
  it('agrees with the depth of the parsed value, brackets, quotes and backslashes inside strings included', () => {
    const tricky = fc.constantFrom('[', ']', '{', '}', '"', '\\', '\\"', '\\\\', 'x', '[[{"');
    const text = fc.array(tricky, { maxLength: 8 }).map((parts) => parts.join(''));
    const value = fc.letrec((tie) => ({
      node: fc.oneof({ depthSize: 'small' }, text, fc.integer(), fc.array(tie('node'), { maxLength: 3 }), fc.dictionary(text, tie('node'), { maxKeys: 3 })),
    })).node;
    fc.assert(fc.property(value, fc.integer({ min: 0, max: 6 }), (parsed, limit) => {
      const text = JSON.stringify(parsed);
      expect(nestsDeeperThan(Buffer.from(text), limit)).toBe(depthOf(parsed) > limit);
      expect(nestsDeeperThan(text, limit)).toBe(depthOf(parsed) > limit);
    }), { seed: 19, numRuns: 500 });
  });

  it('stops at the first bracket past the limit and treats an unterminated string as shallow (JSON.parse refuses it)', () => {
    expect(nestsDeeperThan(Buffer.from('[[[' + 'x'.repeat(10)), 2)).toBe(true);
    expect(nestsDeeperThan(Buffer.from('["[[[[[[[[[['), 2)).toBe(false);
    expect(nestsDeeperThan(Buffer.from('{"a":"\\\\"}'), 1)).toBe(false);
  });

  it('parseJsonText refuses over-deep text before parsing it, as a SyntaxError saying why, and parses the rest as JSON.parse does', () => {
    const deep = '['.repeat(MAX_JSON_DEPTH + 1) + ']'.repeat(MAX_JSON_DEPTH + 1);
    for (const text of [deep, Buffer.from(deep)]) {
      const error = (() => { try { parseJsonText(text); } catch (caught) { return caught; } })();
      expect(error).toBeInstanceOf(JsonNestingError);
      expect(error).toBeInstanceOf(SyntaxError);
      expect((error as Error).message).toContain(`more than ${MAX_JSON_DEPTH} levels`);
    }
    expect(parseJsonText('{"a":["é\\u0000",1]}')).toEqual(JSON.parse('{"a":["é\\u0000",1]}'));
    expect(parseJsonText(Buffer.from('[[1]]'), 2)).toEqual([[1]]);
    expect(() => parseJsonText('{"a":')).toThrow(SyntaxError);
  });

  it('parseJsonText refuses text holding more arrays and objects than any request has, however shallow (a 1 MiB line of them parsed for ~90 ms)', () => {
    const stuffed = `{"x":[${Array.from({ length: MAX_JSON_CONTAINERS }, () => '[]').join(',')}]}`;
    const error = (() => { try { parseJsonText(Buffer.from(stuffed)); } catch (caught) { return caught; } })();
    expect(error).toBeInstanceOf(JsonNestingError);
    expect((error as Error).message).toBe(`it holds more than ${MAX_JSON_CONTAINERS} arrays and objects`);
    // Brackets in strings do not count, and an embeddings request's 2,048 token arrays are far below the limit.
    expect(parseJsonText(`{"s":"${'['.repeat(100_000)}"}`)).toEqual({ s: '['.repeat(100_000) });
    const tokens = { input: Array.from({ length: 2_048 }, () => [1, 2, 3]) };
    expect(parseJsonText(JSON.stringify(tokens))).toEqual(tokens);
  });
});
