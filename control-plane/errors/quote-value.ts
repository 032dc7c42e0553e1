/**
 * How error messages echo what a client sent. A message quotes a bad value so the client sees
 * what was refused, but only its beginning: a 10,000-item `stop` array echoed whole made a
 * 70 KB error body, and a 100 KB `model` string a 100 KB one.
 */

/** Characters of a client's value an error message quotes before `…`. */
export const QUOTED_CHARACTERS = 100;

/** Longest message an error carries; a longer one keeps its head (the field) and tail (what is allowed). */
export const MAX_MESSAGE_CHARACTERS = 1_000;

/**
 * `value` as JSON for an error message, cut after QUOTED_CHARACTERS with `…` and the size of
 * what was cut: `["a","a",…] (10000 items)`. Renders no more of the value than it shows.
 */
export function quoteValue(value: unknown): string {
  const rendered = new BoundedJson(QUOTED_CHARACTERS);
  rendered.write(value, 0);
  if (!rendered.cut) return rendered.text;
  const size = typeof value === 'string' ? ` (${value.length} characters)` : Array.isArray(value) && value.length > 1 ? ` (${value.length} items)` : '';
  return `${cutBefore(rendered.text, QUOTED_CHARACTERS)}…${size}`;
}

/** `text` cut after QUOTED_CHARACTERS with `…`: for a client's string a message quotes itself ('…'). */
export function shortened(text: string): string {
  return text.length <= QUOTED_CHARACTERS ? text : `${cutBefore(text, QUOTED_CHARACTERS)}…`;
}

/**
 * The backstop for messages built without quoteValue (and graphql-js's own, which quote whole
 * strings): every double-quoted literal longer than QUOTED_CHARACTERS is cut with `…`, and a
 * message still over MAX_MESSAGE_CHARACTERS keeps its first and last part around ` … `.
 */
export function capMessage(message: string): string {
  if (message.length <= MAX_MESSAGE_CHARACTERS) return message;
  const quotesCut = message.replace(LONG_QUOTED_LITERAL, (literal) => `${cutBefore(literal, QUOTED_CHARACTERS + 1)}…"`);
  if (quotesCut.length <= MAX_MESSAGE_CHARACTERS) return quotesCut;
  const tail = Math.floor(MAX_MESSAGE_CHARACTERS / 3);
  const head = MAX_MESSAGE_CHARACTERS - tail - 3;
  return `${cutBefore(quotesCut, head)} … ${cutAfter(quotesCut, quotesCut.length - tail)}`;
}

/** A JSON string literal (escapes included) of more than QUOTED_CHARACTERS characters. */
const LONG_QUOTED_LITERAL = new RegExp(`"(?:[^"\\\\]|\\\\.){${QUOTED_CHARACTERS + 1},}"`, 'g');

/** `text` up to `end`, never splitting a surrogate pair. */
function cutBefore(text: string, end: number): string {
  const code = text.charCodeAt(end - 1);
  return text.slice(0, code >= 0xd800 && code <= 0xdbff ? end - 1 : end);
}

/** `text` from `start`, never splitting a surrogate pair. */
function cutAfter(text: string, start: number): string {
  const code = text.charCodeAt(start);
  return text.slice(code >= 0xdc00 && code <= 0xdfff ? start + 1 : start);
}

/** JSON text of a value, written until it passes `limit` characters, then no further. */
class BoundedJson {
  text = '';
  cut = false;

  constructor(private readonly limit: number) {}

  write(value: unknown, depth: number): void {
    if (this.full()) return;
    if (typeof value === 'string') return this.append(JSON.stringify(value.slice(0, this.limit + 1)), value.length > this.limit + 1);
    // Numbers as themselves (a form's NaN reads NaN, not JSON's null); functions and symbols never come from a client.
    if (value === null || typeof value !== 'object') return this.append(String(value), false);
    if (depth >= 8) {
      this.cut = true;
      return;
    }
    const array = Array.isArray(value);
    this.append(array ? '[' : '{', false);
    const entries = array ? (value as unknown[]).keys() : Object.keys(value).values();
    let first = true;
    for (const entry of entries) {
      if (this.full()) return;
      if (!first) this.append(',', false);
      first = false;
      if (!array) this.append(`${JSON.stringify(String(entry).slice(0, this.limit + 1))}:`, false);
      this.write((value as Record<string | number, unknown>)[entry as string | number], depth + 1);
    }
    if (!this.cut) this.append(array ? ']' : '}', false);
  }

  private append(piece: string, truncated: boolean): void {
    this.text += piece;
    if (truncated || this.text.length > this.limit) this.cut = true;
  }

  private full(): boolean {
    if (this.text.length > this.limit) this.cut = true;
    return this.cut;
  }
}
