import { fieldPath, findNulByte, refuseNulBytes } from '../../control-plane/database/nul-bytes';

describe('findNulByte', () => {
  it.each([
    ['a clean value', { prompt: 'a cat', n: 1, tags: ['x', { y: 'z' }], none: null }, null],
    ['a top-level string', 'a\u0000b', { path: [], inKey: false }],
    ['a nested value', { input: { offers: [{ id: 'ok' }, { id: 'o\u0000' }] } }, { path: ['input', 'offers', 1, 'id'], inKey: false }],
    ['a key', { spec: { ['k\u0000']: 1 } }, { path: ['spec'], inKey: true }],
    // The six characters \u0000 (an escaped backslash in JSON) are not a NUL.
    ['the escape as text', { prompt: '\\u0000' }, null],
  ])('%s', (_label, value, expected) => {
    expect(findNulByte(value)).toEqual(expected);
  });

  it('walks a value nested deeper than the call stack without overflowing', () => {
    let deep: unknown = '\u0000';
    for (let depth = 0; depth < 200_000; depth++) deep = [deep];
    expect(findNulByte(deep)?.path).toHaveLength(200_000);
  });

  it('names the field: dots for fields, brackets for indexes, the body when there is nothing to name', () => {
    expect(fieldPath('input', ['offers', 0, 'id'])).toBe('input.offers[0].id');
    expect(fieldPath(null, ['metadata', 'tags', 1])).toBe('metadata.tags[1]');
    expect(fieldPath(null, [])).toBeNull();
    expect(() => refuseNulBytes({ [`k\u0000`]: 1 })).toThrow(expect.objectContaining({ code: 'invalid_request', param: null, message: expect.stringContaining('a key in the request body') }));
    expect(() => refuseNulBytes({ prompt: '\u0000' })).toThrow(expect.objectContaining({ code: 'invalid_request', param: 'prompt' }));
  });
});
