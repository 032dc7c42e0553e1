/**
 * What of an agent's line a workspace may read. An agent prints what its operator needs: the
 * control plane's address, its engine's URL, a local model's path, stack traces full of install
 * paths, and errors quoting whatever an engine answered. The console shows a replica's lines to
 * anyone holding a key of the workspace, so before a line is kept it loses: addresses and URLs,
 * absolute paths (the file name stays: "…/model.gguf"), anything shaped like a secret (our
 * `mk-`/`jt-`/`rt-` tokens, bearer tokens, `key=value` credentials, any long random-looking
 * run), and control characters; and it is cut to `maxChars`.
 */
export function scrubLogText(text: string, maxChars: number): string {
  let scrubbed = text.replace(CONTROL_CHARACTERS, ' ');
  for (const [pattern, replacement] of RULES) scrubbed = scrubbed.replace(pattern, replacement as never);
  scrubbed = scrubbed.replace(/\s+/g, ' ').trim();
  return scrubbed.length > maxChars ? `${scrubbed.slice(0, maxChars - 1)}…` : scrubbed;
}

// eslint-disable-next-line no-control-regex
const CONTROL_CHARACTERS = /[\u0000-\u0008\u000b-\u001f\u007f\u001b]/g;

/** In this order: a URL holds an address and a path, an address may hold digits a later rule would take. */
const RULES: ReadonlyArray<readonly [RegExp, string | ((...parts: string[]) => string)]> = [
  [/\bBearer\s+\S+/gi, 'Bearer <secret>'],
  [/\b((?:api[_-]?key|token|secret|password|passwd|authorization|credential)s?)(["']?\s*[=:]\s*["']?)(?!Bearer <secret>)[^\s"',}]+/gi, (_all, name, separator) => `${name}${separator}<secret>`],
  [/\b[a-z][a-z0-9+.-]*:\/\/[^\s"'<>]+/gi, '<url>'],
  [/\b(?:mk|jt|rt|whsec|sk|csl)[-_][A-Za-z0-9_-]{12,}/g, '<secret>'],
  [/\[[0-9a-f:.]+\](?::\d{1,5})?/gi, '<address>'],
  [/\b\d{1,3}(?:\.\d{1,3}){3}(?::\d{1,5})?\b/g, '<address>'],
  // host:port with at least one letter in the host (a time such as 12:30 is not an address).
  [/\b(?=[a-z0-9.-]*[a-z])[a-z0-9-]+(?:\.[a-z0-9-]+)*:\d{2,5}\b/gi, '<address>'],
  // Absolute paths keep their last segment: which file, not where it is installed.
  [/(?<![\w.~-])(?:[A-Za-z]:)?(?:[\\/][\w.@+~-]+){2,}/g, (path) => `…/${path.split(/[\\/]/).pop()}`],
  [/[A-Za-z0-9+/_=-]{32,}/g, '<redacted>'],
];
