/**
 * What a request log entry stores of a request's bodies, for a workspace that turned storing
 * on: the client's body and the answer, each cut to the cap (and marked so). Bytes, not text:
 * they become text when the log writes its batch, off the request path.
 */
export interface RequestContent {
  readonly request: Buffer;
  readonly requestTruncated: boolean;
  /** The answer's bytes (a stream's SSE lines as sent); null where answers are not stored (embeddings: vectors). */
  readonly response: Buffer | null;
  readonly responseTruncated: boolean;
}

/**
 * Collects one request's bodies as its job runs. Made at admission only for a workspace that
 * stores bodies (`AuthenticatedKey.storesBodies`), so every other request pays one branch:
 * no copy, no buffer, nothing kept. It keeps references to the chunks it is handed (they are
 * not reused) up to the cap, so storing costs a few array pushes per chunk until then.
 */
export class ContentCapture {
  private readonly chunks: Buffer[] = [];
  private answerBytes = 0;
  private answerTruncated = false;

  constructor(
    private readonly body: Buffer,
    private readonly maxBytes: number,
    /** Whether the answer is kept (false for embeddings). */
    private readonly keepsAnswer = true,
  ) {}

  /** A piece of a streamed answer. */
  chunk(data: Buffer): void {
    if (!this.keepsAnswer) return;
    const room = this.maxBytes - this.answerBytes;
    if (room <= 0) {
      this.answerTruncated = true;
      return;
    }
    const kept = data.length > room ? data.subarray(0, room) : data;
    if (kept.length < data.length) this.answerTruncated = true;
    this.chunks.push(kept);
    this.answerBytes += kept.length;
  }

  /** A whole answer (not streamed). */
  output(data: Buffer): void {
    this.chunk(data);
  }

  content(): RequestContent {
    const requestTruncated = this.body.length > this.maxBytes;
    return {
      request: requestTruncated ? this.body.subarray(0, this.maxBytes) : this.body,
      requestTruncated,
      response: this.keepsAnswer ? Buffer.concat(this.chunks, this.answerBytes) : null,
      responseTruncated: this.answerTruncated,
    };
  }
}
