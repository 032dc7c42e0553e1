import net from 'node:net';
import { AppError } from '../errors/app-error';
import { hostOf, resolvePublicHost, type HostResolver } from './public-host';

export interface WebhookUrlPolicy {
  resolve: HostResolver;
  /**
   * Development and tests only: also accept plain-HTTP receivers on loopback
   * (`WEBHOOK_ALLOW_INSECURE_LOOPBACK`). Off by default; it never opens private networks.
   */
  allowInsecureLoopback: boolean;
}

export const MAX_WEBHOOK_URL_LENGTH = 2_048;

/**
 * docs/api-contract.md#webhooks: `webhook_url` must be public HTTPS (422 `invalid_webhook_url`). Checked when a
 * request is submitted and again, resolving the host anew, before every delivery attempt, so a
 * name that later points inside the network (DNS rebinding) is refused at send time too.
 * Returns the addresses the host resolved to, so the sender can connect to exactly those.
 */
export async function checkWebhookUrl(raw: unknown, policy: WebhookUrlPolicy, param = 'webhook_url'): Promise<{ url: URL; addresses: string[] }> {
  const refuse = (why: string) => new AppError('invalid_webhook_url', `${param} must be a public HTTPS URL: ${why}`, { param });
  if (typeof raw !== 'string' || raw.length === 0) throw refuse('expected a non-empty string');
  if (raw.length > MAX_WEBHOOK_URL_LENGTH) throw refuse(`longer than ${MAX_WEBHOOK_URL_LENGTH} characters`);
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw refuse('not a valid absolute URL');
  }
  if (url.username || url.password) throw refuse('credentials in the URL are not allowed; authenticate with the signature instead');
  const hostname = hostOf(url);
  const loopbackException = policy.allowInsecureLoopback && isLoopbackHost(hostname);
  if (url.protocol !== 'https:' && !(url.protocol === 'http:' && loopbackException)) {
    throw refuse(`scheme '${url.protocol.replace(/:$/, '')}' is not allowed; use https`);
  }
  if (loopbackException) return { url, addresses: net.isIP(hostname) ? [hostname] : ['127.0.0.1'] };
  const host = await resolvePublicHost(hostname, policy.resolve);
  if ('refused' in host) throw refuse(host.refused);
  return { url, addresses: host.addresses };
}

function isLoopbackHost(hostname: string): boolean {
  return hostname === 'localhost' || hostname === '::1' || (net.isIPv4(hostname) && hostname.startsWith('127.'));
}
