/**
 * The guest flood's client in bench:shared: one keep-alive HTTP/1.1 connection per closed loop,
 * the same request bytes written again and again, and only what the benchmark reads parsed out
 * of the answer (status, the error code of a refusal, the first content chunk and the usage of
 * a stream). node:http's client spent ~100 µs of CPU per attempt, twice what the server spent
 * refusing it, on the same two cores as the owner's processes: a real flood's clients are not
 * on the server's machine, so the load generator should cost as little as it can (as `wrk` does
 * in `npm run bench`).
 */
import net from 'node:net';

export interface RawAnswer {
  status: number;
  firstTokenAt: number | null;
  tokens: number;
  error?: string;
}

type State = 'head' | 'length' | 'chunk-size' | 'chunk-data' | 'chunk-end';

export class RawHttpConnection {
  private socket: net.Socket | null = null;
  private readonly request: Buffer;
  /** Bytes received and not parsed yet, as latin1 text (one char per byte, so lengths are byte counts). */
  private buffer = '';
  private state: State = 'head';
  private remaining = 0;
  private answer: { status: number; body: string; events: string; firstTokenAt: number | null; chunks: number; usage: number | null; close: boolean } | null = null;
  private waiting: ((answer: RawAnswer) => void) | null = null;

  constructor(private readonly url: URL, key: string, body: string, private readonly now: () => number) {
    this.request = Buffer.from(`POST ${url.pathname} HTTP/1.1\r\nHost: ${url.host}\r\nAuthorization: Bearer ${key}\r\n`
      + `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
  }

  /** Sends the request and resolves with its answer (status 0 with an error when the connection failed). */
  send(): Promise<RawAnswer> {
    return new Promise((resolve) => {
      this.waiting = resolve;
      this.state = 'head';
      this.buffer = '';
      this.answer = null;
      this.connection().write(this.request);
    });
  }

  close(): void {
    this.socket?.destroy();
    this.socket = null;
  }

  private connection(): net.Socket {
    if (this.socket && !this.socket.destroyed) return this.socket;
    const socket = net.connect(Number(this.url.port), this.url.hostname);
    socket.setNoDelay(true);
    socket.setEncoding('latin1');
    socket.on('data', (text: string) => {
      this.buffer += text;
      this.parse();
    });
    const failed = (error?: Error) => {
      // A connection already replaced (closed after a `Connection: close` answer) answers for nothing.
      if (this.socket !== socket) return;
      this.socket = null;
      this.settle({ status: 0, firstTokenAt: null, tokens: 0, error: error?.message ?? 'connection closed' });
    };
    socket.on('error', failed);
    socket.on('close', () => failed());
    this.socket = socket;
    return socket;
  }

  private parse(): void {
    for (;;) {
      if (this.state === 'head') {
        const end = this.buffer.indexOf('\r\n\r\n');
        if (end < 0) return;
        const head = this.buffer.slice(0, end).toLowerCase();
        this.buffer = this.buffer.slice(end + 4);
        const length = /\r\ncontent-length:\s*(\d+)/.exec(head);
        this.answer = { status: Number(head.slice(9, 12)), body: '', events: '', firstTokenAt: null, chunks: 0, usage: null, close: head.includes('\r\nconnection: close') };
        if (length) {
          this.state = 'length';
          this.remaining = Number(length[1]);
        } else {
          this.state = head.includes('\r\ntransfer-encoding: chunked') ? 'chunk-size' : 'length';
          this.remaining = 0;
        }
      } else if (this.state === 'length') {
        if (this.buffer.length < this.remaining) return;
        this.answer!.body = this.buffer.slice(0, this.remaining);
        this.buffer = this.buffer.slice(this.remaining);
        this.finish();
        return;
      } else if (this.state === 'chunk-size') {
        const end = this.buffer.indexOf('\r\n');
        if (end < 0) return;
        const size = parseInt(this.buffer.slice(0, end), 16);
        this.buffer = this.buffer.slice(end + 2);
        this.remaining = size;
        this.state = size === 0 ? 'chunk-end' : 'chunk-data';
      } else if (this.state === 'chunk-data') {
        if (this.buffer.length < this.remaining + 2) return;
        this.onChunk(this.buffer.slice(0, this.remaining));
        this.buffer = this.buffer.slice(this.remaining + 2);
        this.state = 'chunk-size';
      } else {
        // The last chunk's CRLF (no trailers are sent).
        if (this.buffer.length < 2) return;
        this.buffer = this.buffer.slice(2);
        this.finish();
        return;
      }
    }
  }

  /** A 200's SSE events (as the node:http client in shared/load-loops.ts reads them); any other answer's body. */
  private onChunk(text: string): void {
    const answer = this.answer!;
    if (answer.status !== 200) {
      answer.body += text;
      return;
    }
    answer.events += text;
    let end: number;
    while ((end = answer.events.indexOf('\n\n')) !== -1) {
      const event = answer.events.slice(0, end);
      answer.events = answer.events.slice(end + 2);
      if (!event.startsWith('data: {')) continue;
      if (event.includes('"content":"') && !event.includes('"content":""')) {
        answer.chunks++;
        answer.firstTokenAt ??= this.now();
      } else if (event.includes('"usage":{')) {
        answer.usage = (JSON.parse(event.slice(6)) as { usage: { completion_tokens: number } }).usage.completion_tokens;
      }
    }
  }

  private finish(): void {
    const answer = this.answer!;
    this.state = 'head';
    let error: string | undefined;
    if (answer.status !== 200) {
      try {
        error = (JSON.parse(answer.body) as { error?: { code?: string } }).error?.code ?? 'unknown';
      } catch {
        error = answer.body.slice(0, 80);
      }
    }
    if (answer.close) this.close();
    this.settle({ status: answer.status, firstTokenAt: answer.firstTokenAt, tokens: answer.usage ?? answer.chunks, error });
  }

  private settle(answer: RawAnswer): void {
    const waiting = this.waiting;
    this.waiting = null;
    waiting?.(answer);
  }
}
