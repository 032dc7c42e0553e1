import type { IncomingMessage } from 'node:http';

const EMPTY = Buffer.alloc(0);

/**
 * The whole body of a request whose message node:http has already parsed to its end (its bytes
 * wait in the stream's buffer, nobody has read them), taken synchronously; undefined when some
 * of it has not arrived yet, it was already read, or it is larger than `limit` (readBody then
 * reads it, or answers 413, as for any request).
 *
 * Why: a small request's body usually arrives in the same packet as its headers, so a handler
 * started a little later (the guest lane) finds it complete. Reading it through events and a
 * promise costs a flowing-mode switch, three listeners and several ticks; a flood of guest
 * attempts refused in memory paid that on every one.
 */
export function takeBufferedBody(request: IncomingMessage, limit: number): Buffer | undefined {
  if (!request.complete || request.readableFlowing !== null || request.readableDidRead) return undefined;
  const length = request.readableLength;
  if (length > limit) return undefined;
  if (length === 0) return EMPTY;
  // The parser has pushed the end, so read(n) hands back all n bytes at once (one chunk, or their concatenation).
  return (request.read(length) as Buffer | null) ?? undefined;
}
