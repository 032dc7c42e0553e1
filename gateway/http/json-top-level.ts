import {
  BACKSLASH, CLOSE_BRACE, CLOSE_BRACKET, closingQuoteEnd, COLON, COMMA, isDelimiter, OPEN_BRACE, OPEN_BRACKET, QUOTE, skipWhitespace,
} from '../../common/json-spans';
import { MAX_JSON_DEPTH } from '../../common/json-nesting';

/** A member whose value is an object or an array: present, but not a scalar (the full parse judges it). */
export const NESTED = Symbol('nested');

export type TopLevelValue = string | number | boolean | null | typeof NESTED;

/** Where a member's value lies in the raw bytes, [start, end): the workspace base URL rewrites `model` in place (model-field.ts). */
export interface ValueSpan {
  readonly start: number;
  readonly end: number;
}

/** JSON's number grammar: what JSON.parse would read as a number. */
const NUMBER = /^-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?$/;

/**
 * The values of a few top-level members of a JSON object, read from its raw bytes without
 * building it: the shared endpoint refuses most guest attempts (no idle slot, no credit) on
 * `model`, `max_tokens` and `n` alone, and a refusal must not pay for parsing the body.
 *
 * Reads as JSON.parse would: only members of the top-level object count (a `"model"` inside
 * `messages` or inside a string is not one), member names are compared decoded (`"mod\u0065l"`
 * is `model`), a repeated name takes its last value, and strings are decoded with their
 * escapes. Strings are skipped with `indexOf` (native), so a large body costs what
 * json-nesting.ts's depth scan costs (~1 µs for a typical chat body).
 *
 * Returns null when the text is not, as far as this scan can tell, one JSON object nesting at
 * most MAX_JSON_DEPTH levels (the caller then parses it and answers the parse's own 400). It
 * validates structure, not every byte: what passes here can still fail JSON.parse (a stray
 * control character in a string, `[1,}`), which the full parse after admission refuses.
 *
 * `spans`, when given, learns where each found member's value lies (the last one's, as for its value).
 */
export function topLevelValues(raw: Buffer, names: readonly string[], spans?: Map<string, ValueSpan>): Map<string, TopLevelValue> | null {
  const found = new Map<string, TopLevelValue>();
  const length = raw.length;
  let index = skipWhitespace(raw, 0);
  if (raw[index] !== OPEN_BRACE) return null;
  index = skipWhitespace(raw, index + 1);
  if (raw[index] === CLOSE_BRACE) return skipWhitespace(raw, index + 1) === length ? found : null;
  for (;;) {
    if (raw[index] !== QUOTE) return null;
    const nameEnd = closingQuoteEnd(raw, index);
    if (nameEnd < 0) return null;
    const name = wantedName(raw, index, nameEnd, names);
    if (name === undefined) return null;
    index = skipWhitespace(raw, nameEnd);
    if (raw[index] !== COLON) return null;
    const start = skipWhitespace(raw, index + 1);
    const byte = raw[start];
    let end: number;
    let value: TopLevelValue | undefined;
    if (byte === QUOTE) {
      end = closingQuoteEnd(raw, start);
      if (end < 0) return null;
      if (name !== null) {
        value = decodeString(raw, start, end);
        if (value === undefined) return null;
      }
    } else if (byte === OPEN_BRACE || byte === OPEN_BRACKET) {
      end = nestedEnd(raw, start);
      if (end < 0) return null;
      value = NESTED;
    } else {
      end = start;
      while (end < length && !isDelimiter(raw[end])) end++;
      if (end === start) return null;
      // Only a wanted member's literal is read (and checked); the parse judges the others.
      if (name !== null) {
        const literal = scalar(raw.toString('latin1', start, end));
        if (literal === undefined) return null;
        value = literal;
      }
    }
    if (name !== null) {
      found.set(name, value!);
      spans?.set(name, { start, end });
    }
    index = skipWhitespace(raw, end);
    if (raw[index] === COMMA) {
      index = skipWhitespace(raw, index + 1);
    } else if (raw[index] === CLOSE_BRACE) {
      return skipWhitespace(raw, index + 1) === length ? found : null;
    } else {
      return null;
    }
  }
}

/** The member name at [start, end) (its quotes included) if it is one of `names`, null if not, undefined if it is not a JSON string. */
function wantedName(raw: Buffer, start: number, end: number, names: readonly string[]): string | null | undefined {
  if (!hasEscape(raw, start, end)) {
    const size = end - start - 2;
    for (const name of names) if (name.length === size && sameBytes(raw, start + 1, name)) return name;
    return null;
  }
  const decoded = decodeString(raw, start, end);
  if (decoded === undefined) return undefined;
  return names.includes(decoded) ? decoded : null;
}

/** A JSON string token (quotes included) decoded as JSON.parse would (invalid UTF-8 becomes U+FFFD, as the full parse's `toString` makes it). */
function decodeString(raw: Buffer, start: number, end: number): string | undefined {
  if (!hasEscape(raw, start, end)) return raw.toString('utf8', start + 1, end - 1);
  try {
    return JSON.parse(raw.toString('utf8', start, end)) as string;
  } catch {
    return undefined;
  }
}

/** Whether the bytes at `at` spell `name` (ASCII). */
function sameBytes(raw: Buffer, at: number, name: string): boolean {
  for (let index = 0; index < name.length; index++) if (raw[at + index] !== name.charCodeAt(index)) return false;
  return true;
}

/** Whether the string token at [start, end) has a backslash (names and the values read here are short: a loop, not a search of the rest of the body). */
function hasEscape(raw: Buffer, start: number, end: number): boolean {
  for (let index = start + 1; index < end - 1; index++) if (raw[index] === BACKSLASH) return true;
  return false;
}

/** Index just past the object or array opening at `start`, strings skipped natively; -1 when it does not close or nests deeper than MAX_JSON_DEPTH. */
function nestedEnd(raw: Buffer, start: number): number {
  let depth = 0;
  const length = raw.length;
  for (let index = start; index < length; index++) {
    const byte = raw[index];
    if (byte === QUOTE) {
      const end = closingQuoteEnd(raw, index);
      if (end < 0) return -1;
      index = end - 1;
    } else if (byte === OPEN_BRACE || byte === OPEN_BRACKET) {
      // The top-level object is one level already.
      if (++depth + 1 > MAX_JSON_DEPTH) return -1;
    } else if (byte === CLOSE_BRACE || byte === CLOSE_BRACKET) {
      if (--depth === 0) return index + 1;
    }
  }
  return -1;
}

function scalar(text: string): TopLevelValue | undefined {
  if (text === 'true') return true;
  if (text === 'false') return false;
  if (text === 'null') return null;
  return NUMBER.test(text) ? Number(text) : undefined;
}
