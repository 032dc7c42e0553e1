import type { IncomingMessage } from 'node:http';
import type { MultipartForm } from './multipart-form';

/**
 * Bodies read before their endpoint's handler ran. The workspace base URL (`/v1/…`) must read a
 * request's body to learn its `model`, and so its deployment, before the deployment's handler
 * runs; that handler then reads the same body through readBody or readMultipart, which take it
 * from here instead of the (drained) socket. The bytes were counted in the request's budget
 * when they were read, and are not counted again.
 *
 * Keyed by the request object, so nothing outlives it; taken once.
 */
const bodies = new WeakMap<IncomingMessage, Buffer | MultipartForm>();

export function setRoutedBody(request: IncomingMessage, body: Buffer | MultipartForm): void {
  bodies.set(request, body);
}

/** The raw body set for `request`, taken; undefined when none (the handler reads the socket, as on every other path). */
export function takeRoutedBytes(request: IncomingMessage): Buffer | undefined {
  const body = bodies.get(request);
  if (!Buffer.isBuffer(body)) return undefined;
  bodies.delete(request);
  return body;
}

/** The multipart form set for `request`, taken; undefined when none. */
export function takeRoutedForm(request: IncomingMessage): MultipartForm | undefined {
  const body = bodies.get(request);
  if (body === undefined || Buffer.isBuffer(body)) return undefined;
  bodies.delete(request);
  return body;
}
