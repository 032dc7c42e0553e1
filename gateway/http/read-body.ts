import type { IncomingMessage } from 'node:http';
import { AppError } from '../../control-plane/api/errors';
import { takeRoutedBytes } from './routed-body';

/** Where a body's bytes are counted as they arrive (request-budget.ts): the refusal when they no longer fit. */
export interface BodyMemory {
  body(totalBytes: number): AppError | null;
}

/**
 * For a body too small to matter (`limit` at most UNCOUNTED_LIMIT_BYTES): an anonymous GraphQL
 * sign-in, for one. Any larger body must be read into a request's budget.
 */
export const UNCOUNTED: BodyMemory = { body: () => null };
export const UNCOUNTED_LIMIT_BYTES = 64 * 1024;
/** The operator token's requests: not a tenant's, counted in no tenant's budget. */
export const OPERATOR: BodyMemory = { body: () => null };

/**
 * Reads the raw request body up to `limit` bytes; the bytes are later passed to the engine as-is.
 * The bytes received so far are held in `memory` (the request's tenant budget, request-budget.ts)
 * as they arrive, and a body that no longer fits is refused there (429/503), the rest unread. The
 * budget is not optional: a reader without one was how every earlier surface shipped unbounded.
 */
export function readBody(request: IncomingMessage, limit: number, memory: BodyMemory): Promise<Buffer> {
  if (memory === UNCOUNTED && limit > UNCOUNTED_LIMIT_BYTES) {
    return Promise.reject(new Error(`a body of up to ${limit} bytes must be read into a request's budget, not UNCOUNTED`));
  }
  const routed = takeRoutedBytes(request);
  if (routed) return routed.length > limit ? Promise.reject(tooLarge(limit)) : Promise.resolve(routed);
  const declared = Number(request.headers['content-length']);
  if (declared > limit) return Promise.reject(tooLarge(limit));
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    request.on('data', (chunk: Buffer) => {
      size += chunk.length;
      const refusal = size > limit ? tooLarge(limit) : memory.body(size);
      if (refusal) {
        request.removeAllListeners('data');
        request.resume();
        reject(refusal);
        return;
      }
      chunks.push(chunk);
    });
    request.once('end', () => resolve(chunks.length === 1 ? chunks[0] : Buffer.concat(chunks, size)));
    request.once('error', (error) => reject(cutShort(error)));
  });
}

function tooLarge(limit: number): AppError {
  return new AppError('body_too_large', `request body is larger than the limit of ${limit} bytes`);
}

/**
 * The client closed the connection or broke the body's framing (bad chunked encoding) before
 * the body ended: its mistake, a 400 (which it will not see), not an unhandled error logged
 * and counted as a 500.
 */
export function cutShort(error: Error): AppError {
  return new AppError('invalid_request', 'the request body was cut short: the connection closed or its framing broke before the body ended', { cause: error });
}
