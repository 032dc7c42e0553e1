import type { IncomingMessage } from 'node:http';

/**
 * True when a request is answered before its body was read to the end (refused by its headers:
 * no key, a declared length over the limit). Such an answer closes the connection: keeping it
 * alive would make Node read and discard the rest of the body, and a client sending 16 MiB bodies
 * in a loop had the server allocating (and collecting) hundreds of MB a second for nothing.
 */
export function bodyLeftUnread(request: IncomingMessage): boolean {
  return !request.complete;
}
