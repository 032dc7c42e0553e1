import { randomFillSync } from 'node:crypto';

/** Random bytes drawn at once: 512 span ids' worth. */
const POOL_BYTES = 4_096;
const ZERO_TRACE_ID = '0'.repeat(32);
const ZERO_SPAN_ID = '0'.repeat(16);

/**
 * Trace and span ids (lowercase hex, 16 and 8 random bytes), cut from a pool of random hex: one
 * crypto call and one hex conversion per 512 span ids. The SDK's generator draws Math.random per 4
 * bytes and converts each id to hex on its own; with every request traced, that was a tenth of
 * tracing's CPU in a server's profile. An all-zero id is invalid (W3C) and is drawn again.
 */
export class RandomIds {
  private readonly bytes = Buffer.allocUnsafe(POOL_BYTES);
  private pool = '';
  private at = 0;

  traceId(): string {
    const id = this.take(32);
    return id === ZERO_TRACE_ID ? this.traceId() : id;
  }

  spanId(): string {
    const id = this.take(16);
    return id === ZERO_SPAN_ID ? this.spanId() : id;
  }

  private take(chars: number): string {
    if (this.at + chars > this.pool.length) {
      this.pool = randomFillSync(this.bytes).toString('hex');
      this.at = 0;
    }
    this.at += chars;
    return this.pool.slice(this.at - chars, this.at);
  }
}
