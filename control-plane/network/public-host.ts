import { lookup } from 'node:dns/promises';
import net from 'node:net';
import { isPrivateAddress } from './private-addresses';
import { shortened } from '../errors/quote-value';

/** Resolves a host name to every address it has (injectable: tests cannot use public DNS). */
export type HostResolver = (hostname: string) => Promise<string[]>;

export const systemResolver: HostResolver = async (hostname) =>
  (await lookup(hostname, { all: true, verbatim: true })).map((entry) => entry.address);

/** A URL's host as DNS and `net.isIP` take it: IPv6 without brackets, no trailing dot. */
export function hostOf(url: URL): string {
  return url.hostname.replace(/^\[|\]$/g, '').replace(/\.$/, '');
}

const BLOCKED_NAMES = /(^|\.)(localhost|local|internal|localdomain|home\.arpa)$/i;

/**
 * Whether the platform may connect to `hostname` on a user's behalf: a public address, or a
 * public name every address of which is public. Anything else would let a user reach the
 * platform's own network (cloud metadata, databases, admin ports) through us.
 * Returns the addresses to connect to, or why the host is refused.
 */
export async function resolvePublicHost(hostname: string, resolve: HostResolver): Promise<{ addresses: string[] } | { refused: string }> {
  if (!hostname) return { refused: 'no host' };
  if (net.isIP(hostname)) {
    return isPrivateAddress(hostname) ? { refused: `${hostname} is a private, loopback, link-local or reserved address` } : { addresses: [hostname] };
  }
  if (BLOCKED_NAMES.test(hostname) || !hostname.includes('.')) return { refused: `'${shortened(hostname)}' is not a public host name` };
  let addresses: string[];
  try {
    addresses = await resolve(hostname);
  } catch {
    return { refused: `'${shortened(hostname)}' does not resolve` };
  }
  if (addresses.length === 0) return { refused: `'${shortened(hostname)}' does not resolve` };
  const internal = addresses.find((address) => isPrivateAddress(address));
  if (internal) return { refused: `'${shortened(hostname)}' resolves to ${internal}, a private, loopback, link-local or reserved address` };
  return { addresses };
}
