import { parseJsonText } from '../../common/json-nesting';
import { CLOSE_BRACE, CLOSE_BRACKET, closingQuoteEnd, COMMA, isDelimiter, OPEN_BRACE, OPEN_BRACKET, QUOTE, skipWhitespace } from '../../common/json-spans';

/**
 * Where the value of the last top-level member `name` of a JSON object lies in `raw` (a batch
 * line's `body`), or null when it has none. For text that JSON.parse has just accepted: its
 * structure is trusted, so values are skipped by counting brackets (strings natively), without
 * json-spans.ts's shortcut for arrays of numbers, which assumes an answer's shape. The last
 * member, because JSON.parse keeps the last of a repeated name.
 */
export function lastMemberSpan(raw: Buffer, name: string): { start: number; end: number } | null {
  let found: { start: number; end: number } | null = null;
  let index = skipWhitespace(raw, 0);
  if (raw[index] !== OPEN_BRACE) return null;
  index = skipWhitespace(raw, index + 1);
  while (raw[index] === QUOTE) {
    const nameEnd = closingQuoteEnd(raw, index);
    const matches = nameIs(raw, index, nameEnd, name);
    index = skipWhitespace(raw, nameEnd);
    const start = skipWhitespace(raw, index + 1);
    const end = valueEnd(raw, start);
    if (matches) found = { start, end };
    index = skipWhitespace(raw, end);
    if (raw[index] !== COMMA) break;
    index = skipWhitespace(raw, index + 1);
  }
  return found;
}

/** Whether the string token at [start, end) (quotes included) is `name`, escapes decoded. */
function nameIs(raw: Buffer, start: number, end: number, name: string): boolean {
  for (let index = start + 1; index < end - 1; index++) {
    if (raw[index] === 0x5c) return parseJsonText(raw.subarray(start, end)) === name;
  }
  return end - start - 2 === Buffer.byteLength(name) && raw.toString('utf8', start + 1, end - 1) === name;
}

function valueEnd(raw: Buffer, start: number): number {
  const byte = raw[start];
  if (byte === QUOTE) return closingQuoteEnd(raw, start);
  if (byte !== OPEN_BRACE && byte !== OPEN_BRACKET) {
    let index = start;
    while (index < raw.length && !isDelimiter(raw[index])) index++;
    return index;
  }
  let depth = 0;
  for (let index = start; index < raw.length; index++) {
    const current = raw[index];
    if (current === QUOTE) {
      index = closingQuoteEnd(raw, index) - 1;
    } else if (current === OPEN_BRACE || current === OPEN_BRACKET) {
      depth++;
    } else if ((current === CLOSE_BRACE || current === CLOSE_BRACKET) && --depth === 0) {
      return index + 1;
    }
  }
  return raw.length;
}
