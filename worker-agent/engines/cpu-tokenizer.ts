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

const PIECE_PATTERN = /\s*(?:\w+|[^\w\s])/g;

/**
 * `text` cut into its tokens, each with the whitespace before it, so the pieces join back to
 * `text` exactly (trailing whitespace rides on the last piece): how a fixed answer (JSON, tool
 * arguments) is streamed a token at a time.
 */
export function tokenPieces(text: string): string[] {
  const pieces = text.match(PIECE_PATTERN) ?? [];
  const covered = pieces.reduce((length, piece) => length + piece.length, 0);
  if (covered < text.length) {
    if (pieces.length === 0) return [text];
    pieces[pieces.length - 1] += text.slice(covered);
  }
  return pieces;
}
