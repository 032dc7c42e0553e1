import { closingQuoteEnd } from '../../common/json-spans';

/**
 * No API field nests anywhere near this deep. JSON.parse builds a body nested thousands of
 * levels deep, but JSON.stringify and recursive readers (an error message quoting a field, the
 * shared endpoint's rewritten body, an engine) overflow the stack on it: a fuzzed
 * `"stop": [[[[…]]]]` was a 500.
 */
export const MAX_JSON_DEPTH = 128;

/**
 * True when JSON text nests arrays and objects deeper than `maxDepth` (brackets inside strings
 * do not count). It runs before JSON.parse, so a hostile body is refused without building a
 * single object: V8 spent ~430 ms building a 4 MB `[[[…]]]` that was then thrown away, with
 * the event loop blocked for every other client. Strings are skipped with `indexOf` (native),
 * so a large but flat body costs a fraction of a millisecond per megabyte.
 */
export function nestsDeeperThan(raw: Buffer, maxDepth: number): boolean {
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
