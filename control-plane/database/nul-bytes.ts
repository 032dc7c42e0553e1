import { AppError } from '../errors/app-error';

/** Where a value holds a NUL: the keys and indexes leading to it, and whether it is a key (not a string value) there. */
export interface NulBytePosition {
  path: Array<string | number>;
  inKey: boolean;
}

/**
 * The first string (or object key) in `value` that holds U+0000, or null. PostgreSQL text and
 * jsonb cannot store that character ("invalid byte sequence for encoding UTF8: 0x00"; jsonb
 * refuses the escaped `\u0000` too), so client strings that may be stored are checked with
 * this at each entry and refused as bad input, not left to fail as a 500 in the database.
 * Iterative, so a deeply nested body cannot overflow the stack.
 */
export function findNulByte(value: unknown): NulBytePosition | null {
  return findText(value, (text) => text.includes('\0'));
}

/** Half of a UTF-16 surrogate pair (with the `u` flag a whole pair is one character and does not match). */
const LONE_SURROGATE = /[\ud800-\udfff]/u;

/**
 * The first string (or object key) in `value` holding half of a UTF-16 surrogate pair, or
 * null. JSON.parse accepts `"\ud800"`, but PostgreSQL's jsonb refuses it ("invalid input
 * syntax for type json": a fuzzed negative_prompt was a 500) and a text column would keep
 * U+FFFD instead of what was sent.
 */
export function findLoneSurrogate(value: unknown): NulBytePosition | null {
  return findText(value, (text) => LONE_SURROGATE.test(text));
}

function findText(value: unknown, matches: (text: string) => boolean): NulBytePosition | null {
  // Each pending value keeps a link to its parent's step, not a copy of its whole path, so a
  // deeply nested value costs time in proportion to its size, not to its depth squared.
  const pending: Array<[unknown, Step | null]> = [[value, null]];
  while (pending.length > 0) {
    const [current, step] = pending.pop()!;
    if (typeof current === 'string') {
      if (matches(current)) return { path: pathOf(step), inKey: false };
    } else if (Array.isArray(current)) {
      for (let index = current.length - 1; index >= 0; index--) pending.push([current[index], { parent: step, segment: index }]);
    } else if (current !== null && typeof current === 'object') {
      const entries = Object.entries(current);
      for (const [key] of entries) if (matches(key)) return { path: pathOf(step), inKey: true };
      for (let index = entries.length - 1; index >= 0; index--) pending.push([entries[index][1], { parent: step, segment: entries[index][0] }]);
    }
  }
  return null;
}

interface Step {
  parent: Step | null;
  segment: string | number;
}

function pathOf(step: Step | null): Array<string | number> {
  const path: Array<string | number> = [];
  for (let current = step; current; current = current.parent) path.push(current.segment);
  return path.reverse();
}

/** `input` + [`offers`, 0, `id`] → `input.offers[0].id`; null when there is nothing to name. */
export function fieldPath(base: string | null, path: ReadonlyArray<string | number>): string | null {
  let name = base ?? '';
  for (const segment of path) name += typeof segment === 'number' ? `[${segment}]` : name === '' ? segment : `.${segment}`;
  return name === '' ? null : name;
}

/** The message for a NUL at `position` under `base` (the field, argument or variable it came in). */
export function nulByteMessage(base: string | null, position: NulBytePosition): { message: string; param: string | null } {
  const param = fieldPath(base, position.path);
  const where = param ?? 'the request body';
  return {
    param,
    message: position.inKey
      ? `a key in ${where} contains a NUL character (\\u0000), which cannot be stored; remove it`
      : `${where} must not contain NUL characters (\\u0000), which cannot be stored; remove them`,
  };
}

/** 400 `invalid_request` naming the field when `value` holds a NUL anywhere (strings, nested keys and values). */
export function refuseNulBytes(value: unknown, base: string | null = null): void {
  const position = findNulByte(value);
  if (!position) return;
  const { message, param } = nulByteMessage(base, position);
  throw new AppError('invalid_request', message, { param });
}

/** 400 `invalid_request` naming the field when `value` holds half of a surrogate pair anywhere (strings, nested keys and values). */
export function refuseLoneSurrogates(value: unknown, base: string | null = null): void {
  const position = findLoneSurrogate(value);
  if (!position) return;
  const param = fieldPath(base, position.path);
  const where = param ?? 'the request body';
  throw new AppError('invalid_request', `${position.inKey ? `a key in ${where}` : where} holds half of a UTF-16 surrogate pair (an unpaired \\ud800-\\udfff escape), `
    + 'which cannot be stored; send whole characters', { param });
}
