import type { IncomingHttpHeaders } from 'node:http';

/**
 * Headers a forwarding proxy adds to say who it forwards for: the standard ones (`Forwarded`,
 * `Via`), the `X-Forwarded-*` family, and every `…-IP` / `…-Addr(ess)` client header proxies and
 * CDNs use (`X-Real-IP` from nginx, `True-Client-IP`, `CF-Connecting-IP`, `Fastly-Client-IP`,
 * `X-Client-IP`, `X-Cluster-Client-IP`, `X-Envoy-External-Address`, …). A pattern, not a list
 * of names: a local proxy sending a name missing from a list made a remote client look local.
 */
const FORWARDING_HEADER = /^(forwarded|via)$|forwarded|(^|-)(ip|addr|address)$/;

/**
 * The first header in `headers` that a forwarding proxy would have added, or null. On a
 * loopback connection it means the peer is a proxy on this host, not the client.
 */
export function forwardingHeaderIn(headers: IncomingHttpHeaders): string | null {
  return Object.keys(headers).find((name) => FORWARDING_HEADER.test(name.toLowerCase())) ?? null;
}
