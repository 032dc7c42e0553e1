/**
 * `pattern` is an ECMA-262 regular expression (JSON Schema's own rule), compiled with the `u`
 * flag as the spec asks; a pattern that only compiles without it (`\-` outside a class, as some
 * hand-written schemas have) is read as JavaScript would. Compiled once per pattern text.
 */
const compiled = new Map<string, RegExp | null>();
const MAX_CACHED = 1_000;

export function compilePattern(pattern: string): RegExp | null {
  const known = compiled.get(pattern);
  if (known !== undefined) return known;
  let expression: RegExp | null = null;
  for (const flags of ['u', '']) {
    try {
      expression = new RegExp(pattern, flags);
      break;
    } catch {
      // not valid under these flags; the next try or null
    }
  }
  if (compiled.size >= MAX_CACHED) compiled.clear();
  compiled.set(pattern, expression);
  return expression;
}
