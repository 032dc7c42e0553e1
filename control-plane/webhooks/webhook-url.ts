import { lookup } from 'node:dns/promises';
import net from 'node:net';
import { AppError } from '../errors/app-error';
import { isPrivateAddress } from './private-addresses';

/** Resolves a host name to every address it has (injectable: tests cannot use public DNS). */
export type HostResolver = (hostname: string) => Promise<string[]>;

export const systemResolver: HostResolver = async (hostname) =>
  (await lookup(hostname, { all: true, verbatim: true })).map((entry) => entry.address);

export interface WebhookUrlPolicy {
  resolve: HostResolver;
  /**
   * Development and tests only: also accept plain-HTTP receivers on loopback
   * (`WEBHOOK_ALLOW_INSECURE_LOOPBACK`). Off by default; it never opens private networks.
   */
  allowInsecureLoopback: boolean;
}

const MAX_URL_LENGTH = 2_048;
const BLOCKED_NAMES = /(^|\.)(localhost|local|internal|localdomain|home\.arpa)$/i;

/**
 * SPEC.md: `webhook_url` must be public HTTPS (422 `invalid_webhook_url`). Checked when a
 * request is submitted and again, resolving the host anew, before every delivery attempt, so a
 * name that later points inside the network (DNS rebinding) is refused at send time too.
 * Returns the addresses the host resolved to, so the sender can connect to exactly those.
 */
export async function checkWebhookUrl(raw: unknown, policy: WebhookUrlPolicy, param = 'webhook_url'): Promise<{ url: URL; addresses: string[] }> {
  const refuse = (why: string) => new AppError('invalid_webhook_url', `${param} must be a public HTTPS URL: ${why}`, { param });
  if (typeof raw !== 'string' || raw.length === 0) throw refuse('expected a non-empty string');
  if (raw.length > MAX_URL_LENGTH) throw refuse(`longer than ${MAX_URL_LENGTH} characters`);
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw refuse('not a valid absolute URL');
  }
  if (url.username || url.password) throw refuse('credentials in the URL are not allowed; authenticate with the signature instead');
  const hostname = url.hostname.replace(/^\[|\]$/g, '').replace(/\.$/, '');
  const loopbackException = policy.allowInsecureLoopback && isLoopbackHost(hostname);
  if (url.protocol !== 'https:' && !(url.protocol === 'http:' && loopbackException)) {
    throw refuse(`scheme '${url.protocol.replace(/:$/, '')}' is not allowed; use https`);
  }
  if (loopbackException) return { url, addresses: net.isIP(hostname) ? [hostname] : ['127.0.0.1'] };
  if (!hostname) throw refuse('no host');
  if (net.isIP(hostname)) {
    if (isPrivateAddress(hostname)) throw refuse(`${hostname} is a private, loopback, link-local or reserved address`);
    return { url, addresses: [hostname] };
  }
  if (BLOCKED_NAMES.test(hostname) || !hostname.includes('.')) throw refuse(`'${hostname}' is not a public host name`);
  let addresses: string[];
  try {
    addresses = await policy.resolve(hostname);
  } catch {
    throw refuse(`'${hostname}' does not resolve`);
  }
  if (addresses.length === 0) throw refuse(`'${hostname}' does not resolve`);
  const internal = addresses.find((address) => isPrivateAddress(address));
  if (internal) throw refuse(`'${hostname}' resolves to ${internal}, a private, loopback, link-local or reserved address`);
  return { url, addresses };
}

function isLoopbackHost(hostname: string): boolean {
  return hostname === 'localhost' || hostname === '::1' || (net.isIPv4(hostname) && hostname.startsWith('127.'));
}
