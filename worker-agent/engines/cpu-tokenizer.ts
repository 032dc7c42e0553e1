/**
 * The CPU engine's tokenizer: a word or a single punctuation mark is one token. Generated
 * text is built from such tokens, so usage counts are exact and tests can recount them.
 */
const TOKEN_PATTERN = /\w+|[^\w\s]/g;

export function tokenize(text: string): string[] {
  return text.match(TOKEN_PATTERN) ?? [];
}

export function countTokens(text: string): number {
  return tokenize(text).length;
}
