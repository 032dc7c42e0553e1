import { randomBytes } from 'node:crypto';
import type { Span } from '../../common/tracing/tracing';

/** A caller's id is kept when it is 1–128 visible ASCII characters (no spaces, no control bytes). */
const SANE_ID = /^[\x21-\x7e]{1,128}$/;

/**
 * Request ids: the caller's `X-Request-Id` when it is a sane token (a proxy or client that
 * already tagged the request keeps its id across hops), else `req_<process prefix>_<counter>`.
 * The prefix is random per process, so ids from several servers do not collide; the counter
 * costs an increment where a random id would cost a crypto call per request.
 */
export class RequestIds {
  private readonly prefix = `req_${randomBytes(6).toString('hex')}_`;
  private sequence = 0;

  next(): string {
    return this.prefix + (this.sequence++).toString(36);
  }

  /** `incoming` is the raw header value (node:http joins duplicates with ", ", which is refused). */
  from(incoming: string | string[] | undefined): string {
    return typeof incoming === 'string' && SANE_ID.test(incoming) ? incoming : this.next();
  }
}

/** What the fast lane hands the text route about the request it is serving. */
export interface RequestTrace {
  readonly id: string;
  /** `performance.now()` when the request arrived. */
  readonly receivedAt: number;
  /** Its HTTP server span (request-span.ts) when tracing is on; null otherwise. */
  readonly span: Span | null;
}
