import http from 'node:http';
import https from 'node:https';
import type { OtlpTls } from './otlp-tls';

export interface OtlpHttpSenderOptions {
  /** The OTLP/HTTP traces URL (http or https). */
  readonly endpoint: string;
  /** Extra headers of each request (`OTEL_EXPORTER_OTLP_HEADERS`). */
  readonly headers: Readonly<Record<string, string>>;
  /** How long one request may take, from the write to the end of the answer. */
  readonly timeoutMs: number;
  /** For an https endpoint: certificates to trust instead of Node's bundled ones, and a client certificate and key (OTEL_EXPORTER_OTLP_CERTIFICATE, …_CLIENT_CERTIFICATE, …_CLIENT_KEY). */
  readonly tls?: OtlpTls;
}

/** Errors of a kept-alive socket the receiver closed while we were about to reuse it. */
const STALE_SOCKET_ERRORS = new Set(['ECONNRESET', 'EPIPE']);

/**
 * POSTs OTLP/HTTP protobuf bodies, one at a time (the caller waits for each), over one kept-alive
 * connection, so an export pays no TCP connect or TLS handshake (40–110 µs of system CPU each on
 * loopback; node:http's own 200–330 µs per request remain: 0.5 µs a span in batches of 512, left
 * as it is, bench/results/2026-11-29-issue37-tracing-export.md). `send` never rejects: it resolves whether the receiver took the body (a 2xx),
 * and a failed or timed-out request is the caller's to drop. The one retry is for a reused socket
 * that turns out to be closed (the receiver's idle timeout racing our next export, the case
 * Node's documentation gives for `request.reusedSocket`): the body never reached the receiver.
 * Other failures (5xx, 429, timeouts) are not retried, so a struggling receiver gets no more
 * than one request per batch and the queue behind it stays bounded.
 */
export class OtlpHttpSender {
  private readonly url: URL;
  private readonly agent: http.Agent;
  private readonly transport: typeof http | typeof https;

  constructor(private readonly options: OtlpHttpSenderOptions) {
    this.url = new URL(options.endpoint);
    this.transport = this.url.protocol === 'https:' ? https : http;
    this.agent = new this.transport.Agent({ keepAlive: true, maxSockets: 1, ...options.tls });
  }

  async send(body: Buffer): Promise<boolean> {
    const first = await this.attempt(body);
    if (first !== 'stale socket') return first === 'taken';
    return (await this.attempt(body)) === 'taken';
  }

  /** Closes the kept-alive connection (after the last send). */
  close(): void {
    this.agent.destroy();
  }

  private attempt(body: Buffer): Promise<'taken' | 'refused' | 'stale socket'> {
    return new Promise((resolve) => {
      const request = this.transport.request(this.url, {
        method: 'POST',
        agent: this.agent,
        headers: { ...this.options.headers, 'content-type': 'application/x-protobuf', 'content-length': body.length },
      });
      const timer = setTimeout(() => request.destroy(new Error('OTLP export timed out')), this.options.timeoutMs);
      timer.unref();
      let settled = false;
      const settle = (outcome: 'taken' | 'refused' | 'stale socket') => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        resolve(outcome);
      };
      request.on('error', (error: NodeJS.ErrnoException) => {
        settle(request.reusedSocket && STALE_SOCKET_ERRORS.has(error.code ?? '') ? 'stale socket' : 'refused');
      });
      request.on('response', (response) => {
        // The answer's body (an ExportTraceServiceResponse, or an error's text) is read and dropped so the socket can be reused.
        response.resume();
        response.on('end', () => settle(response.statusCode! >= 200 && response.statusCode! < 300 ? 'taken' : 'refused'));
        response.on('error', () => settle('refused'));
        response.on('close', () => settle('refused'));
      });
      request.end(body);
    });
  }
}
