import { closingQuoteEnd } from './json-spans';

/**
 * No API field nests anywhere near this deep. JSON.parse builds a body nested thousands of
 * levels deep, but JSON.stringify and recursive readers (an error message quoting a field, the
 * shared endpoint's rewritten body, an engine) overflow the stack on it: a fuzzed
 * `"stop": [[[[…]]]]` was a 500.
 */
export const MAX_JSON_DEPTH = 128;

/**
 * No request has anywhere near this many arrays and objects (an embeddings request of 2,048
 * token arrays has 2,049; tools, messages and content parts a few hundred). JSON.parse builds
 * each one: a 1 MiB line of `[[…],[…],…]` nested under the depth limit is ~500,000 of them,
 * ~90 ms of parsing and as much again to stringify, in one piece that no slicing can split
 * (issue 33: a batch of such lines held /healthz at ~300 ms while it was validated).
 */
export const MAX_JSON_CONTAINERS = 50_000;

export type JsonShapeProblem = 'depth' | 'containers';

/**
 * JSON text refused before it was parsed, because it nests deeper than the limit or holds more
 * arrays and objects than any request needs. A SyntaxError, as JSON.parse's own refusals are: a
 * caller that answers "not JSON" for those answers this one too, its message saying why.
 */
export class JsonNestingError extends SyntaxError {
  constructor(readonly maxDepth: number, readonly problem: JsonShapeProblem = 'depth', readonly maxContainers = MAX_JSON_CONTAINERS) {
    super(problem === 'depth' ? `it nests arrays and objects more than ${maxDepth} levels deep` : `it holds more than ${maxContainers} arrays and objects`);
    this.name = 'JsonNestingError';
  }
}

/**
 * JSON.parse for text that a tenant wrote, or that an engine answered to a tenant's request:
 * request bodies, batch files and their lines, stored metadata, engine answers. Over-deep
 * nesting and more containers than any request has are refused by the scan below before
 * anything is built (JsonNestingError). The one way such text is parsed:
 * test/unit/json-parse-sites.test.ts fails on a JSON.parse of anything but the few trusted
 * texts it lists.
 */
export function parseJsonText(text: Buffer | string, maxDepth = MAX_JSON_DEPTH, maxContainers = MAX_JSON_CONTAINERS): unknown {
  const problem = jsonShapeProblem(text, maxDepth, maxContainers);
  if (problem) throw new JsonNestingError(maxDepth, problem, maxContainers);
  return JSON.parse(typeof text === 'string' ? text : text.toString('utf8'));
}

/** True when JSON text nests arrays and objects deeper than `maxDepth` (jsonShapeProblem's depth rule alone). */
export function nestsDeeperThan(raw: Buffer | string, maxDepth: number): boolean {
  return jsonShapeProblem(raw, maxDepth, Number.POSITIVE_INFINITY) === 'depth';
}

/**
 * Why JSON text must not be parsed: it nests arrays and objects deeper than `maxDepth`, or holds
 * more than `maxContainers` of them (brackets inside strings do not count); null when neither.
 * It runs before JSON.parse, so a hostile body is refused without building a single object: V8
 * spent ~430 ms building a 4 MB `[[[…]]]` that was then thrown away, with the event loop blocked
 * for every other client. Strings are skipped with `indexOf` (native), so a large but flat body
 * costs a fraction of a millisecond per megabyte.
 */
export function jsonShapeProblem(raw: Buffer | string, maxDepth = MAX_JSON_DEPTH, maxContainers = MAX_JSON_CONTAINERS): JsonShapeProblem | null {
  if (typeof raw === 'string') return textShapeProblem(raw, maxDepth, maxContainers);
  let depth = 0;
  let containers = 0;
  const length = raw.length;
  for (let index = 0; index < length; index++) {
    const byte = raw[index];
    if (byte === 0x22) {
      const end = closingQuoteEnd(raw, index);
      if (end === -1) return null; // unterminated: JSON.parse refuses it, cheaply
      index = end - 1;
    } else if (byte === 0x7b || byte === 0x5b) {
      if (++depth > maxDepth) return 'depth';
      if (++containers > maxContainers) return 'containers';
    } else if (byte === 0x7d || byte === 0x5d) {
      depth--;
    }
  }
  return null;
}

/** The same scan over a string's UTF-16 code units (the structural characters are ASCII in both). */
function textShapeProblem(text: string, maxDepth: number, maxContainers: number): JsonShapeProblem | null {
  let depth = 0;
  let containers = 0;
  const length = text.length;
  for (let index = 0; index < length; index++) {
    const code = text.charCodeAt(index);
    if (code === 0x22) {
      const end = closingQuoteEndOfText(text, index);
      if (end === -1) return null;
      index = end - 1;
    } else if (code === 0x7b || code === 0x5b) {
      if (++depth > maxDepth) return 'depth';
      if (++containers > maxContainers) return 'containers';
    } else if (code === 0x7d || code === 0x5d) {
      depth--;
    }
  }
  return null;
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
