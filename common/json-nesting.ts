import { closingQuoteEnd } from './json-spans';

/**
 * No API field nests anywhere near this deep. JSON.parse builds a body nested thousands of
 * levels deep, but JSON.stringify and recursive readers (an error message quoting a field, the
 * shared endpoint's rewritten body, an engine) overflow the stack on it: a fuzzed
 * `"stop": [[[[…]]]]` was a 500.
 */
export const MAX_JSON_DEPTH = 128;

/**
 * JSON text refused before it was parsed, because it nests deeper than the limit. A
 * SyntaxError, as JSON.parse's own refusals are: a caller that answers "not JSON" for those
 * answers this one too, its message saying why.
 */
export class JsonNestingError extends SyntaxError {
  constructor(readonly maxDepth: number) {
    super(`it nests arrays and objects more than ${maxDepth} levels deep`);
    this.name = 'JsonNestingError';
  }
}

/**
 * JSON.parse for text that a tenant wrote, or that an engine answered to a tenant's request:
 * request bodies, batch files and their lines, stored metadata, engine answers. Over-deep
 * nesting is refused by the scan below before anything is built (JsonNestingError). The one
 * way such text is parsed: test/unit/json-parse-sites.test.ts fails on a JSON.parse of
 * anything but the few trusted texts it lists.
 */
export function parseJsonText(text: Buffer | string, maxDepth = MAX_JSON_DEPTH): unknown {
  if (nestsDeeperThan(text, maxDepth)) throw new JsonNestingError(maxDepth);
  return JSON.parse(typeof text === 'string' ? text : text.toString('utf8'));
}

/**
 * True when JSON text nests arrays and objects deeper than `maxDepth` (brackets inside strings
 * do not count). It runs before JSON.parse, so a hostile body is refused without building a
 * single object: V8 spent ~430 ms building a 4 MB `[[[…]]]` that was then thrown away, with
 * the event loop blocked for every other client. Strings are skipped with `indexOf` (native),
 * so a large but flat body costs a fraction of a millisecond per megabyte.
 */
export function nestsDeeperThan(raw: Buffer | string, maxDepth: number): boolean {
  if (typeof raw === 'string') return textNestsDeeperThan(raw, maxDepth);
  let depth = 0;
  const length = raw.length;
  for (let index = 0; index < length; index++) {
    const byte = raw[index];
    if (byte === 0x22) {
      const end = closingQuoteEnd(raw, index);
      if (end === -1) return false; // unterminated: JSON.parse refuses it, cheaply
      index = end - 1;
    } else if (byte === 0x7b || byte === 0x5b) {
      if (++depth > maxDepth) return true;
    } else if (byte === 0x7d || byte === 0x5d) {
      depth--;
    }
  }
  return false;
}

/** The same scan over a string's UTF-16 code units (the structural characters are ASCII in both). */
function textNestsDeeperThan(text: string, maxDepth: number): boolean {
  let depth = 0;
  const length = text.length;
  for (let index = 0; index < length; index++) {
    const code = text.charCodeAt(index);
    if (code === 0x22) {
      const end = closingQuoteEndOfText(text, index);
      if (end === -1) return false;
      index = end - 1;
    } else if (code === 0x7b || code === 0x5b) {
      if (++depth > maxDepth) return true;
    } else if (code === 0x7d || code === 0x5d) {
      depth--;
    }
  }
  return false;
}

function closingQuoteEndOfText(text: string, start: number): number {
  let from = start + 1;
  for (;;) {
    const quote = text.indexOf('"', from);
    if (quote < 0) return -1;
    let backslashes = 0;
    while (text.charCodeAt(quote - 1 - backslashes) === 0x5c) backslashes++;
    if (backslashes % 2 === 0) return quote + 1;
    from = quote + 1;
  }
}
