import net from 'node:net';

/**
 * A server bound to `host` (`HOST`, `GRPC_HOST`) and who can reach it. A wildcard (`0.0.0.0`,
 * `::`) listens on every interface; a loopback address only to this machine; any other address
 * only on that interface, where processes on this machine must dial it too.
 */
export function isLoopbackBind(host: string): boolean {
  const bare = unbracketed(host).toLowerCase();
  return bare === 'localhost' || bare === '::1' || (net.isIPv4(bare) && bare.startsWith('127.')) || /^::ffff:127\./.test(bare);
}

/** The address a process on this machine dials to reach a server bound to `host`. */
export function localAddressOf(host: string): string {
  if (host === '' || host === '0.0.0.0') return '127.0.0.1';
  if (host === '::' || host === '[::]') return '::1';
  return unbracketed(host);
}

/** `host:port`, an IPv6 literal in brackets. */
export function hostPort(host: string, port: number): string {
  const bare = unbracketed(host);
  return `${net.isIPv6(bare) ? `[${bare}]` : bare}:${port}`;
}

function unbracketed(host: string): string {
  return host.replace(/^\[(.*)\]$/, '$1');
}
