import type { LookupAddress } from 'node:dns';
import net from 'node:net';
import type { Readable } from 'node:stream';
import { Agent, request } from 'undici';
import { AppError } from '../errors/app-error';
import { EVENT_HEADER, SIGNATURE_HEADER, signWebhookPayload } from './webhook-signature';
import { checkWebhookUrl, type WebhookUrlPolicy } from '../network/webhook-url';

export interface AttemptOutcome {
  succeeded: boolean;
  statusCode: number | null;
  error: string | null;
  latencyMs: number;
  signature: string;
}

export interface WebhookSenderOptions {
  /** docs/api-contract.md#webhooks: each attempt times out after 5 s; a slow handler is a failure. */
  attemptTimeoutMs: number;
  urls: WebhookUrlPolicy;
  userAgent: string;
  /** The clock in milliseconds a signature's timestamp is taken from. @default Date.now */
  now?: () => number;
}

/** Of a response body only this much is read, for the attempt log: receivers answer with status codes. */
const MAX_ERROR_BODY = 300;

/**
 * One signed POST. The host is resolved again before each attempt and the connection goes to
 * exactly the address that was checked, so a name that now points inside the network (DNS
 * rebinding) is refused instead of reached. Redirects are not followed (a 3xx is a failure).
 */
export class WebhookSender {
  private readonly now: () => number;

  constructor(private readonly options: WebhookSenderOptions) {
    this.now = options.now ?? Date.now;
  }

  /** `traceparent`: the attempt's span, sent on as the header of that name when traced. */
  async send(url: string, type: string, body: string, secrets: readonly string[], traceparent?: string): Promise<AttemptOutcome> {
    const startedAt = performance.now();
    const signature = signWebhookPayload(secrets, body, Math.floor(this.now() / 1000));
    const elapsed = () => Math.round(performance.now() - startedAt);
    let checked: { url: URL; addresses: string[] };
    try {
      checked = await checkWebhookUrl(url, this.options.urls, 'url');
    } catch (error) {
      const reason = error instanceof AppError ? error.message : String(error);
      return { succeeded: false, statusCode: null, error: `refused before sending: ${reason}`, latencyMs: elapsed(), signature };
    }
    const pinned = pinnedAgent(checked.addresses[0], this.options.attemptTimeoutMs);
    try {
      const response = await request(checked.url, {
        method: 'POST', dispatcher: pinned,
        headers: {
          'content-type': 'application/json', 'user-agent': this.options.userAgent,
          [SIGNATURE_HEADER]: signature, [EVENT_HEADER]: type,
          ...(traceparent ? { traceparent } : {}),
        },
        body,
        signal: AbortSignal.timeout(this.options.attemptTimeoutMs),
      });
      const text = await readPrefix(response.body, MAX_ERROR_BODY);
      const succeeded = response.statusCode >= 200 && response.statusCode < 300;
      return {
        succeeded, statusCode: response.statusCode, latencyMs: elapsed(), signature,
        error: succeeded ? null : `the receiver answered ${response.statusCode}${text ? `: ${text}` : ''}`,
      };
    } catch (error) {
      const timedOut = (error as Error).name === 'TimeoutError' || (error as Error).name === 'AbortError';
      const message = timedOut ? `no answer within ${this.options.attemptTimeoutMs} ms` : (error as Error).message;
      return { succeeded: false, statusCode: null, error: message, latencyMs: elapsed(), signature };
    } finally {
      void pinned.close().catch(() => {});
    }
  }
}

/** An undici Agent whose connections go to `address` whatever the URL's host resolves to now. */
function pinnedAgent(address: string, timeoutMs: number): Agent {
  const family = net.isIP(address) === 6 ? 6 : 4;
  return new Agent({
    connect: {
      timeout: timeoutMs,
      lookup: (_hostname: string, options: { all?: boolean }, callback: (error: Error | null, address: string | LookupAddress[], family?: number) => void) => {
        if (options.all) callback(null, [{ address, family }]);
        else callback(null, address, family);
      },
    },
    headersTimeout: timeoutMs,
    bodyTimeout: timeoutMs,
  });
}

/** The first `limit` characters of a response body; the rest is not read: a receiver may stream without end. */
async function readPrefix(body: Readable, limit: number): Promise<string> {
  let text = '';
  for await (const chunk of body) {
    text += chunk.toString();
    if (text.length >= limit) break;
  }
  body.destroy();
  return text.slice(0, limit);
}
