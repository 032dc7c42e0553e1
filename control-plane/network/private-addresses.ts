import net from 'node:net';
import { ipv6Words } from './ipv6-words';

/**
 * Addresses the platform must never reach on a user's behalf (webhooks, bucket endpoints).
 *
 * IPv4 is a deny-list: loopback, private, link-local (cloud metadata lives at 169.254.169.254),
 * CGNAT, multicast, documentation, benchmarking and reserved ranges.
 *
 * IPv6 is an allow-list, because a deny-list let through whatever it forgot (the rest of `::/8`
 * passed). An IPv6 address is public only when it is global unicast (`2000::/3`) outside the
 * blocks below, or a NAT64 address (`64:ff9b::/96`, RFC 6052) whose IPv4 is public: an IPv6-only
 * host's DNS64 names IPv4-only receivers that way. Everything else is refused, all of `::/8`
 * included: loopback, unspecified, IPv4-mapped, -compatible (deprecated, RFC 4291) and
 * -translated (SIIT) forms. A public IPv4 is written as itself; those spellings only disguise one,
 * and a gateway or the kernel may deliver them to whatever IPv4 they carry. Unique-local
 * (`fc00::/7`, AWS metadata is `fd00:ec2::254`), link-local, site-local, multicast, discard-only
 * (`100::/64`), dummy (`100:0:0:1::/64`), SRv6 SIDs (`5f00::/16`) and local-use NAT64
 * (`64:ff9b:1::/48`) all lie outside `2000::/3`, so they need no entry.
 */
const BLOCKED_IPV4 = new net.BlockList();
for (const [network, prefix] of [
  ['0.0.0.0', 8], ['10.0.0.0', 8], ['100.64.0.0', 10], ['127.0.0.0', 8], ['169.254.0.0', 16], ['172.16.0.0', 12],
  ['192.0.0.0', 24], ['192.0.2.0', 24], ['192.88.99.0', 24], ['192.168.0.0', 16], ['198.18.0.0', 15],
  ['198.51.100.0', 24], ['203.0.113.0', 24], ['224.0.0.0', 4], ['240.0.0.0', 4],
] as const) BLOCKED_IPV4.addSubnet(network, prefix, 'ipv4');

/**
 * Inside `2000::/3`, the blocks of the IANA IPv6 Special-Purpose Address Registry (as updated
 * 2025) refused whole:
 * - `2001::/23` IETF protocol assignments (RFC 2928). It holds Teredo (`2001::/32`, which reaches
 *   a host through a relay named by an embedded, obfuscated IPv4) and benchmarking
 *   (`2001:2::/48`), which are not globally reachable, and the deprecated ORCHID (`2001:10::/28`).
 *   The registry marks some of it globally reachable (the PCP, TURN and DNS-SD anycasts
 *   `2001:1::1`-`3`, AMT `2001:3::/32`, AS112-v6 `2001:4:112::/48`, ORCHIDv2 `2001:20::/28`,
 *   drone entity tags `2001:30::/28`), but they are refused too: an anycast reaches the nearest
 *   instance, which may be the operator's own network, and the rest are identifiers or DNS
 *   sinks, not where a webhook or a bucket lives.
 * - `2001:db8::/32` and `3fff::/20`: documentation (RFC 3849, RFC 9637).
 * - `2002::/16`: 6to4 (RFC 3056). Refused whole rather than judged by the IPv4 it embeds: a
 *   6to4 packet goes to that IPv4 through a relay (RFC 7526 deprecated the public relays, so
 *   what answers is whatever relay the operator's network has, or the host's own tunnel
 *   interface), and the registry does not call it globally reachable. No receiver needs it: its
 *   public IPv4 works directly.
 * - `2620:4f:8000::/48`: AS112 direct delegation (RFC 7534), an anycast DNS sink any network may
 *   run locally.
 */
const BLOCKED_GLOBAL_IPV6 = new net.BlockList();
for (const [network, prefix] of [
  ['2001::', 23], ['2001:db8::', 32], ['2002::', 16], ['2620:4f:8000::', 48], ['3fff::', 20],
] as const) BLOCKED_GLOBAL_IPV6.addSubnet(network, prefix, 'ipv6');

/** True when `address` (an IP literal) is not publicly routable. */
export function isPrivateAddress(address: string): boolean {
  return !isPublicAddress(address);
}

/** True only for a public unicast IPv4, or an IPv6 the allow-list above admits. */
export function isPublicAddress(address: string): boolean {
  const text = address.replace(/^\[|\]$/g, '').split('%')[0];
  const family = net.isIP(text);
  if (family === 4) return !BLOCKED_IPV4.check(text, 'ipv4');
  if (family !== 6) return false;
  const words = ipv6Words(text);
  if (!words) return false;
  if (isWellKnownNat64(words)) return !BLOCKED_IPV4.check(ipv4Of(words), 'ipv4');
  // Global unicast: the first three bits are 001.
  if ((words[0] & 0xe000) !== 0x2000) return false;
  return !BLOCKED_GLOBAL_IPV6.check(text, 'ipv6');
}

/** `64:ff9b::a.b.c.d`: the well-known NAT64 prefix (RFC 6052) and an IPv4 in the last 32 bits. */
function isWellKnownNat64(words: number[]): boolean {
  return words[0] === 0x64 && words[1] === 0xff9b && words.slice(2, 6).every((word) => word === 0);
}

function ipv4Of(words: number[]): string {
  return [words[6] >> 8, words[6] & 0xff, words[7] >> 8, words[7] & 0xff].join('.');
}
