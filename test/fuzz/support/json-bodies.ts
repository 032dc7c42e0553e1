import fc from 'fast-check';
import { anyHostile, hostileKey, hostileValue, objectOf, rawJsonLiteral, stringifyJson } from './hostile-values';

/** A body field: the values a route accepts, and values near its limits (both kept cheap, see `tame`). */
export interface FieldSpec {
  name: string;
  /** Accepted values; `undefined` means "left out". */
  valid: fc.Arbitrary<unknown>;
  /** Values at and past the limits, and wrong types that look right ("2" for 2). */
  near?: readonly unknown[];
  /** Extra hostile shapes for this field (arrays of bad messages…). */
  hostile?: fc.Arbitrary<unknown>;
  /**
   * Maps a hostile value the server would accept but that would make the case expensive
   * (120 s of video, 65,536 tokens × 128 choices) to one it refuses: valid work stays small.
   */
  tame?: (value: unknown) => unknown;
}

export const field = (name: string, valid: fc.Arbitrary<unknown>, options: Omit<FieldSpec, 'name' | 'valid'> = {}): FieldSpec => ({ name, valid, ...options });

/** `value` for integers in [low, high], else the value as it was. */
export const refuseIntegersIn = (low: number, high: number, replacement: unknown) =>
  (value: unknown) => (typeof value === 'number' && value >= low && value <= high ? replacement : value);

/** A field's hostile values: anything, its values near the limits, and its own bad shapes, tamed. */
function hostileFor(spec: FieldSpec): fc.Arbitrary<unknown> {
  const tame = spec.tame ?? ((value: unknown) => value);
  return fc.oneof(
    { arbitrary: anyHostile, weight: 3 },
    ...(spec.near?.length ? [{ arbitrary: fc.constantFrom(...spec.near), weight: 3 }] : []),
    ...(spec.hostile ? [{ arbitrary: spec.hostile, weight: 3 }] : []),
  ).map(tame);
}

/** What is done to one field of an otherwise valid body. */
type Mutation = { index: number; omit: true } | { index: number; value: unknown };

/**
 * A valid body of the route's fields (each given or left out), then up to three fields made
 * hostile or left out, and now and then unknown fields: about a quarter of the bodies stay
 * valid, so cases reach the engines as well as the checks in front of them.
 */
export function bodyArbitrary(specs: readonly FieldSpec[]): fc.Arbitrary<Record<string, unknown>> {
  const mutation = fc.oneof(...specs.map((spec, index) => fc.oneof(
    { arbitrary: hostileFor(spec).map((value): Mutation => ({ index, value })), weight: 4 },
    { arbitrary: fc.constant<Mutation>({ index, omit: true }), weight: 1 },
  )));
  const extra = fc.array(fc.tuple(hostileKey, hostileValue), { minLength: 1, maxLength: 3 });
  return fc.tuple(
    fc.tuple(...specs.map((spec) => spec.valid)),
    fc.oneof({ arbitrary: fc.constant([] as Mutation[]), weight: 1 }, { arbitrary: fc.array(mutation, { minLength: 1, maxLength: 3 }), weight: 3 }),
    fc.oneof({ arbitrary: fc.constant([] as Array<[string, unknown]>), weight: 4 }, { arbitrary: extra, weight: 1 }),
  ).map(([values, mutations, extras]) => {
    const chosen: unknown[] = [...values];
    const omitted = new Set<number>();
    for (const change of mutations) {
      if ('omit' in change) omitted.add(change.index);
      else chosen[change.index] = change.value;
    }
    const entries: Array<[string, unknown]> = [];
    specs.forEach((spec, index) => {
      if (!omitted.has(index) && chosen[index] !== undefined) entries.push([spec.name, chosen[index]]);
    });
    return objectOf([...entries, ...extras]);
  });
}

/** How a JSON body goes on the wire: as JSON.stringify writes it, or broken the ways clients break it. */
export type BodyForm =
  | { kind: 'json' }
  | { kind: 'literal'; literal: string }
  | { kind: 'truncated'; fraction: number }
  | { kind: 'wrapped'; before: string; after: string }
  | { kind: 'encoding'; encoding: 'utf16le' | 'latin1' | 'bom' | 'invalid-utf8' }
  | { kind: 'other-value'; value: unknown }
  | { kind: 'empty' }
  | { kind: 'padded'; bytes: number };

export function bodyFormArbitrary(limit: number): fc.Arbitrary<BodyForm> {
  return fc.oneof(
    { arbitrary: fc.constant<BodyForm>({ kind: 'json' }), weight: 20 },
    { arbitrary: rawJsonLiteral.map((literal): BodyForm => ({ kind: 'literal', literal })), weight: 2 },
    { arbitrary: fc.double({ min: 0, max: 0.99, noNaN: true }).map((fraction): BodyForm => ({ kind: 'truncated', fraction })), weight: 1 },
    {
      arbitrary: fc.record({ before: fc.constantFrom('', ' ', '\n', '[', '{', ')]}\'\n', '//c\n', '/*c*/'), after: fc.constantFrom('', ' ', ',', '}', ']', '\u0000', 'x', '{}', ' // c') })
        .map(({ before, after }): BodyForm => ({ kind: 'wrapped', before, after })),
      weight: 1,
    },
    { arbitrary: fc.constantFrom('utf16le' as const, 'latin1' as const, 'bom' as const, 'invalid-utf8' as const).map((encoding): BodyForm => ({ kind: 'encoding', encoding })), weight: 1 },
    { arbitrary: anyHostile.map((value): BodyForm => ({ kind: 'other-value', value })), weight: 2 },
    { arbitrary: fc.constant<BodyForm>({ kind: 'empty' }), weight: 1 },
    { arbitrary: fc.constantFrom(limit - 1, limit, limit + 1, limit * 2).map((bytes): BodyForm => ({ kind: 'padded', bytes })), weight: 1 },
  );
}

/** Replaces the first value JSON.stringify wrote with raw text (1e400, NaN, a leading plus…). */
const LITERAL_SLOT = '\u0001literal\u0001';

const json = (value: unknown): string => stringifyJson(value)!;

export function serializeBody(body: Record<string, unknown>, form: BodyForm): Buffer {
  switch (form.kind) {
    case 'json':
      return Buffer.from(json(body));
    case 'literal': {
      const [first] = Object.keys(body);
      const text = json(first === undefined ? { value: LITERAL_SLOT } : { ...body, [first]: LITERAL_SLOT });
      return Buffer.from(text.replace(JSON.stringify(LITERAL_SLOT), form.literal));
    }
    case 'truncated': {
      const text = Buffer.from(json(body));
      return text.subarray(0, Math.floor(text.length * form.fraction));
    }
    case 'wrapped':
      return Buffer.from(`${form.before}${json(body)}${form.after}`);
    case 'encoding': {
      const text = json(body);
      if (form.encoding === 'bom') return Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(text)]);
      if (form.encoding === 'invalid-utf8') return Buffer.concat([Buffer.from(text.slice(0, -1)), Buffer.from([0xc3, 0x28, 0xff, 0xfe]), Buffer.from(text.slice(-1))]);
      return Buffer.from(text, form.encoding);
    }
    case 'other-value':
      return Buffer.from(stringifyJson(form.value) ?? '');
    case 'empty':
      return Buffer.alloc(0);
    case 'padded': {
      // Valid JSON of exactly `bytes` bytes (when the body is smaller): whitespace after the object.
      const text = Buffer.from(json(body));
      return text.length >= form.bytes ? text : Buffer.concat([text, Buffer.alloc(form.bytes - text.length, 0x20)]);
    }
  }
}

/** Content types of JSON routes: mostly JSON; otherwise none, another type, or multipart without a real form. */
export const jsonContentType: fc.Arbitrary<string | undefined> = fc.oneof(
  { arbitrary: fc.constant('application/json'), weight: 16 },
  {
    arbitrary: fc.constantFrom(
      undefined, 'application/json; charset=utf-8', 'application/json; charset=utf-16', 'APPLICATION/JSON', 'text/plain', 'application/x-www-form-urlencoded',
      'multipart/form-data', 'multipart/form-data; boundary=', 'multipart/form-data; boundary=xyz', 'application/xml', '*/*', 'application/octet-stream', ';', 'json',
    ),
    weight: 3,
  },
);
