import fc from 'fast-check';

/**
 * Values a client may send where a validator expects something else: wrong types, numbers at
 * and past every boundary JSON can carry, strings that look like numbers or keywords, unicode
 * and control characters, long text, nesting, arrays where objects belong and the reverse.
 */

/** Strings that trip parsers and checks: number look-alikes, keywords, escapes, unicode, control characters. */
const TRICKY_STRINGS = [
  '', ' ', '\t', '\r\n', 'NaN', 'Infinity', '-Infinity', '1e309', '-0', '0x10', '1_000', '1,5', '+1', '٣', '１２',
  'true', 'false', 'null', 'undefined', '[object Object]', '__proto__', 'constructor', 'prototype', 'toString',
  '%00', '%zz', '%', '\u0000', '\ud800', '\udfff', '\ufeff', '\u202e', '\uffff', '😀', '👩‍👩‍👧', 'é', '漢字',
  '../../etc/passwd', '<script>alert(1)</script>', "'; DROP TABLE requests; --", '${jndi:ldap://x}', '{{7*7}}',
  'a'.repeat(33_000), '😀'.repeat(2_000),
];

export const hostileString: fc.Arbitrary<string> = fc.oneof(
  { arbitrary: fc.constantFrom(...TRICKY_STRINGS), weight: 3 },
  { arbitrary: fc.string({ unit: 'binary', maxLength: 24 }), weight: 2 },
  { arbitrary: fc.string({ maxLength: 24 }), weight: 2 },
  { arbitrary: fc.string({ unit: 'grapheme', maxLength: 12 }), weight: 1 },
);

const BOUNDARY_NUMBERS = [
  0, -0, 1, -1, 0.5, -0.5, 1.0000001, 2, 3, 4, 5, 10, 11, 24, 100, 101, 120, 121, 128, 129, 200, 201, 255, 256, 500, 501,
  65_535, 65_536, 65_537, 2 ** 31 - 1, 2 ** 31, -(2 ** 31), 2 ** 32, 2 ** 53 - 1, 2 ** 53, 2 ** 53 + 2, -(2 ** 53),
  1e21, 1e300, Number.MAX_VALUE, -Number.MAX_VALUE, Number.MIN_VALUE, 1e-7,
];

export const hostileNumber: fc.Arbitrary<number> = fc.oneof(
  { arbitrary: fc.constantFrom(...BOUNDARY_NUMBERS), weight: 3 },
  { arbitrary: fc.integer(), weight: 1 },
  { arbitrary: fc.double({ noNaN: true, noDefaultInfinity: true }), weight: 1 },
);

/** Object keys: names routes read, prototype names, and anything else. */
export const hostileKey: fc.Arbitrary<string> = fc.oneof(
  fc.constantFrom('__proto__', 'constructor', 'prototype', 'toString', 'hasOwnProperty', '', ' ', 'model', 'prompt', 'n', 'messages', 'role', 'content', 'type', 'id', 'stream'),
  fc.string({ maxLength: 12 }),
  fc.string({ unit: 'binary', maxLength: 6 }),
);

/** An object built with own properties, so `__proto__` is a key like any other (as JSON.parse makes it). */
export function objectOf(entries: Array<[string, unknown]>): Record<string, unknown> {
  return Object.fromEntries(entries);
}

/**
 * A value nested `depth` levels deep. JSON.parse takes any depth, but JSON.stringify and
 * recursive walkers overflow the stack past a few thousand levels, so it is written as text
 * (`stringifyJson`) rather than built: the server parses what no client library would write.
 */
export class DeepValue {
  constructor(readonly depth: number, readonly shape: 'array' | 'object' | 'mixed') {}

  text(): string {
    let open = '';
    let close = '';
    for (let level = 0; level < this.depth; level++) {
      const asArray = this.shape === 'array' || (this.shape === 'mixed' && level % 2 === 0);
      open += asArray ? '[' : '{"a":';
      close = (asArray ? ']' : '}') + close;
    }
    return `${open}"x"${close}`;
  }

  /** What JSON.stringify writes in its place; `stringifyJson` swaps it for the text. */
  toJSON(): string {
    return `\u0001deep:${this.depth}:${this.shape}\u0001`;
  }

  toString(): string {
    return `new DeepValue(${this.depth}, '${this.shape}')`;
  }
}

/** JSON text of `value`, DeepValues written out at full depth. */
export function stringifyJson(value: unknown): string | undefined {
  const text = JSON.stringify(value);
  return text?.replace(/"\\u0001deep:(\d+):(array|object|mixed)\\u0001"/g, (_match, depth: string, shape: DeepValue['shape']) => new DeepValue(Number(depth), shape).text());
}

export const deeplyNested: fc.Arbitrary<DeepValue> = fc.tuple(
  fc.oneof(fc.integer({ min: 20, max: 200 }), fc.integer({ min: 2_000, max: 10_000 })),
  fc.constantFrom('array' as const, 'object' as const, 'mixed' as const),
).map(([depth, shape]) => new DeepValue(depth, shape));

/** Any JSON value, hostile at every level. */
export const hostileValue: fc.Arbitrary<unknown> = fc.letrec<{ value: unknown }>((tie) => ({
  value: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    { arbitrary: hostileString, weight: 4 },
    { arbitrary: hostileNumber, weight: 4 },
    { arbitrary: fc.boolean(), weight: 1 },
    { arbitrary: fc.constant(null), weight: 1 },
    { arbitrary: fc.array(tie('value'), { maxLength: 4 }), weight: 2 },
    { arbitrary: fc.array(fc.tuple(hostileKey, tie('value')), { maxLength: 4 }).map(objectOf), weight: 2 },
  ),
})).value;

/** A hostile value, sometimes nested thousands of levels deep. */
export const anyHostile: fc.Arbitrary<unknown> = fc.oneof(
  { arbitrary: hostileValue, weight: 12 },
  { arbitrary: deeplyNested, weight: 1 },
);

/**
 * JSON number text JSON.stringify never writes (overflowing, with a plus sign, leading zeros)
 * and bare words: some parse (1e400 is Infinity), most make the body invalid JSON.
 */
export const rawJsonLiteral: fc.Arbitrary<string> = fc.constantFrom(
  '1e400', '-1e400', '1E+999', '123456789012345678901234567890', '-0.0', '0.0000000000000000000001', '4.0', '1.5e1',
  'NaN', 'Infinity', '-Infinity', '+1', '01', '.5', '1.', '0x1F', 'undefined', 'True', "'x'", '"\\ud800"', '"\\u0000"', '"\\x41"', '[,]', '{,}',
);
