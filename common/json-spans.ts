/**
 * Where the values of a JSON text lie, found without building them. An embeddings answer is
 * mostly numbers (about 20 bytes per float: 1.3 MB for 64 vectors of 1024), and building and
 * re-serialising those numbers was most of what the agent and the gateway spent on a large
 * embeddings request (JSON.parse to read `usage`; parse and stringify to join split batches).
 *
 * Arrays whose first element is a number are taken to end at their first `]` (Buffer.indexOf:
 * a memchr), strings at their first unescaped `"`. Anything that does not look like JSON where
 * it is read throws `NotJsonHere`; callers then fall back to JSON.parse, which reports it properly.
 */

export class NotJsonHere extends Error {}

/** Handles one member's value starting at `start`; returns where the value ends, or undefined to have it skipped. */
export type MemberVisitor = (key: string, start: number) => number | undefined;
/** Handles one element starting at `start`; returns where it ends, or undefined to have it skipped. */
export type ElementVisitor = (start: number, position: number) => number | undefined;

/** JSON's structural bytes (gateway/http/json-top-level.ts reads with them too). */
export const QUOTE = 0x22;
export const BACKSLASH = 0x5c;
export const COMMA = 0x2c;
export const COLON = 0x3a;
export const OPEN_BRACE = 0x7b;
export const CLOSE_BRACE = 0x7d;
export const OPEN_BRACKET = 0x5b;
export const CLOSE_BRACKET = 0x5d;

export function skipWhitespace(text: Buffer, at: number): number {
  let index = at;
  while (index < text.length) {
    const byte = text[index];
    if (byte !== 0x20 && byte !== 0x0a && byte !== 0x0d && byte !== 0x09) break;
    index++;
  }
  return index;
}

/** Where the JSON value starting at `start` ends (the index just past it). */
export function valueEnd(text: Buffer, start: number): number {
  const byte = text[start];
  if (byte === QUOTE) return stringEnd(text, start);
  if (byte === OPEN_BRACE) return objectMembers(text, start, () => undefined);
  if (byte === OPEN_BRACKET) {
    const first = text[skipWhitespace(text, start + 1)];
    if (isNumberStart(first)) {
      const close = text.indexOf(CLOSE_BRACKET, start);
      if (close < 0) throw new NotJsonHere('an array does not end');
      return close + 1;
    }
    return arrayElements(text, start, () => undefined);
  }
  if (isNumberStart(byte) || byte === 0x74 || byte === 0x66 || byte === 0x6e) {
    let index = start + 1;
    while (index < text.length && !isDelimiter(text[index])) index++;
    return index;
  }
  throw new NotJsonHere(`no JSON value at byte ${start}`);
}

/** Walks the object at `start` (its `{`), calling `visit` per member; returns the index past its `}`. */
export function objectMembers(text: Buffer, start: number, visit: MemberVisitor): number {
  if (text[start] !== OPEN_BRACE) throw new NotJsonHere(`no object at byte ${start}`);
  let index = skipWhitespace(text, start + 1);
  if (text[index] === CLOSE_BRACE) return index + 1;
  for (;;) {
    if (text[index] !== QUOTE) throw new NotJsonHere(`no member name at byte ${index}`);
    const keyEnd = stringEnd(text, index);
    const key = JSON.parse(text.toString('utf8', index, keyEnd)) as string;
    index = skipWhitespace(text, keyEnd);
    if (text[index] !== COLON) throw new NotJsonHere(`no ':' at byte ${index}`);
    const valueStart = skipWhitespace(text, index + 1);
    index = skipWhitespace(text, visit(key, valueStart) ?? valueEnd(text, valueStart));
    if (text[index] === COMMA) {
      index = skipWhitespace(text, index + 1);
    } else if (text[index] === CLOSE_BRACE) {
      return index + 1;
    } else {
      throw new NotJsonHere(`no ',' or '}' at byte ${index}`);
    }
  }
}

/** Walks the array at `start` (its `[`), calling `visit` per element; returns the index past its `]`. */
export function arrayElements(text: Buffer, start: number, visit: ElementVisitor): number {
  if (text[start] !== OPEN_BRACKET) throw new NotJsonHere(`no array at byte ${start}`);
  let index = skipWhitespace(text, start + 1);
  if (text[index] === CLOSE_BRACKET) return index + 1;
  for (let position = 0; ; position++) {
    index = skipWhitespace(text, visit(index, position) ?? valueEnd(text, index));
    if (text[index] === COMMA) {
      index = skipWhitespace(text, index + 1);
    } else if (text[index] === CLOSE_BRACKET) {
      return index + 1;
    } else {
      throw new NotJsonHere(`no ',' or ']' at byte ${index}`);
    }
  }
}

/** The members of a whole-body object: its top-level values as spans; the body must hold that object and nothing else. */
export function topLevelMembers(text: Buffer): Map<string, { start: number; end: number }> {
  const members = new Map<string, { start: number; end: number }>();
  const end = objectMembers(text, skipWhitespace(text, 0), (key, start) => {
    const valueEndsAt = valueEnd(text, start);
    members.set(key, { start, end: valueEndsAt });
    return valueEndsAt;
  });
  if (skipWhitespace(text, end) !== text.length) throw new NotJsonHere('bytes follow the object');
  return members;
}

function stringEnd(text: Buffer, start: number): number {
  const end = closingQuoteEnd(text, start);
  if (end < 0) throw new NotJsonHere('a string does not end');
  return end;
}

/** Index just past the quote that closes the string opened at `start` (found with indexOf), or -1 when it does not end. */
export function closingQuoteEnd(text: Buffer, start: number): number {
  let from = start + 1;
  for (;;) {
    const quote = text.indexOf(QUOTE, from);
    if (quote < 0) return -1;
    let backslashes = 0;
    while (text[quote - 1 - backslashes] === BACKSLASH) backslashes++;
    if (backslashes % 2 === 0) return quote + 1;
    from = quote + 1;
  }
}

function isNumberStart(byte: number): boolean {
  return byte === 0x2d || (byte >= 0x30 && byte <= 0x39);
}

/** A byte that ends a number or literal. */
export function isDelimiter(byte: number): boolean {
  return byte === COMMA || byte === CLOSE_BRACE || byte === CLOSE_BRACKET || byte === 0x20 || byte === 0x0a || byte === 0x0d || byte === 0x09;
}
