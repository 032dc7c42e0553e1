import type { Logger } from 'pino';
import type { RunSummary } from '../../control-plane/api/inference';

/** What one request's log line says. */
export interface RequestLine {
  readonly requestId: string;
  /** The metrics route (a closed set: route-label.ts). */
  readonly route: string;
  /** The deployment it resolved to, `none`, or a guest's `shared/<model-id>`. */
  readonly deployment: string;
  readonly status: number;
  readonly seconds: number;
  /** What the pipeline knew when the answer ended: tokens (once its job ended) and the first byte's latency. */
  readonly summary?: RunSummary | void;
}

/**
 * One `info` line per request (LOG_REQUESTS, on by default): its id, route, deployment, status,
 * duration, and for inference its tokens and time to first byte, as fields a log shipper indexes
 * (never a formatted string). An aborted stream's tokens are not known yet when its answer ends:
 * its usage record has them (the line says `tokens: "pending"`). Off, nothing is built per request.
 */
export class RequestLog {
  constructor(private readonly logger: Logger, private readonly enabled: boolean) {}

  record(line: RequestLine): void {
    if (!this.enabled || !this.logger.isLevelEnabled('info')) return;
    const { summary } = line;
    const fields: Record<string, unknown> = {
      requestId: line.requestId, route: line.route, deployment: line.deployment, status: line.status, durationMs: Math.round(line.seconds * 1e4) / 10,
    };
    if (summary) {
      if (summary.usage) {
        fields.promptTokens = summary.usage.promptTokens;
        fields.completionTokens = summary.usage.completionTokens;
      } else {
        fields.tokens = 'pending';
      }
      if (summary.firstByteMs > 0) fields.ttftMs = Math.round(summary.firstByteMs * 10) / 10;
    }
    this.logger.info(fields, 'request');
  }
}
