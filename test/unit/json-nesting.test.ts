import fc from 'fast-check';
import { nestsDeeperThan } from '../../gateway/http/json-nesting';

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
      const raw = Buffer.from(JSON.stringify(parsed));
      expect(nestsDeeperThan(raw, limit)).toBe(depthOf(parsed) > limit);
    }), { seed: 19, numRuns: 500 });
  });

  it('stops at the first bracket past the limit and treats an unterminated string as shallow (JSON.parse refuses it)', () => {
    expect(nestsDeeperThan(Buffer.from('[[[' + 'x'.repeat(10)), 2)).toBe(true);
    expect(nestsDeeperThan(Buffer.from('["[[[[[[[[[['), 2)).toBe(false);
    expect(nestsDeeperThan(Buffer.from('{"a":"\\\\"}'), 1)).toBe(false);
  });
});
