import net from 'node:net';

/**
 * Addresses the platform must never reach on a user's behalf (webhooks, bucket endpoints):
 * loopback, private, link-local (cloud metadata lives at 169.254.169.254 and
 * fd00:ec2::254), CGNAT, multicast, documentation and reserved ranges, local-use NAT64.
 * IPv4 embedded in IPv6 (mapped, translated, compatible, NAT64, 6to4) is checked as the IPv4 it
 * carries: a gateway or the kernel may deliver it to that IPv4. Teredo (2001::/32) and the rest of
 * the IETF protocol block 2001::/23 are refused whole: Teredo reaches a host through a relay
 * named by an embedded (and obfuscated) IPv4, and no webhook or bucket legitimately lives there.
 */
const BLOCKED = new net.BlockList();
for (const [network, prefix] of [
  ['0.0.0.0', 8], ['10.0.0.0', 8], ['100.64.0.0', 10], ['127.0.0.0', 8], ['169.254.0.0', 16], ['172.16.0.0', 12],
  ['192.0.0.0', 24], ['192.0.2.0', 24], ['192.88.99.0', 24], ['192.168.0.0', 16], ['198.18.0.0', 15],
  ['198.51.100.0', 24], ['203.0.113.0', 24], ['224.0.0.0', 4], ['240.0.0.0', 4],
] as const) BLOCKED.addSubnet(network, prefix, 'ipv4');
for (const [network, prefix] of [
  ['::', 128], ['::1', 128], ['fc00::', 7], ['fe80::', 10], ['fec0::', 10], ['ff00::', 8], ['2001:db8::', 32],
  ['100::', 64], ['2001::', 23], ['64:ff9b:1::', 48],
] as const) BLOCKED.addSubnet(network, prefix, 'ipv6');

/** True when `address` (an IP literal) is not publicly routable. */
export function isPrivateAddress(address: string): boolean {
  const family = net.isIP(address);
  if (family === 4) return BLOCKED.check(address, 'ipv4');
  if (family !== 6) return true;
  const embedded = embeddedIpv4(address);
  if (embedded) return BLOCKED.check(embedded, 'ipv4');
  return BLOCKED.check(address, 'ipv6');
}

/**
 * The IPv4 inside ::ffff:a.b.c.d (mapped), ::ffff:0:a.b.c.d (translated, RFC 2765 SIIT),
 * ::a.b.c.d (compatible, deprecated but still parsed), 64:ff9b::/96 (NAT64) and
 * 2002:aabb:ccdd::/48 (6to4), else null.
 */
function embeddedIpv4(address: string): string | null {
  const words = expandIpv6(address);
  if (!words) return null;
  if (words[0] === 0x2002) return [words[1] >> 8, words[1] & 0xff, words[2] >> 8, words[2] & 0xff].join('.');
  const zeroes = (from: number, to: number) => words.slice(from, to).every((word) => word === 0);
  const mapped = zeroes(0, 5) && words[5] === 0xffff;
  const translated = zeroes(0, 4) && words[4] === 0xffff && words[5] === 0;
  const compatible = zeroes(0, 6);
  const nat64 = words[0] === 0x64 && words[1] === 0xff9b && zeroes(2, 6);
  if (!mapped && !translated && !compatible && !nat64) return null;
  return [words[6] >> 8, words[6] & 0xff, words[7] >> 8, words[7] & 0xff].join('.');
}

function expandIpv6(address: string): number[] | null {
  let text = address.toLowerCase().replace(/^\[|\]$/g, '').split('%')[0];
  const dotted = /(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (dotted) {
    const parts = dotted[1].split('.').map(Number);
    text = text.slice(0, -dotted[1].length) + `${((parts[0] << 8) | parts[1]).toString(16)}:${((parts[2] << 8) | parts[3]).toString(16)}`;
  }
  const [head, tail] = text.split('::');
  const left = head ? head.split(':') : [];
  const right = tail !== undefined && tail !== '' ? tail.split(':') : [];
  const missing = 8 - left.length - right.length;
  if (text.includes('::') ? missing < 0 : left.length !== 8) return null;
  return [...left, ...Array(text.includes('::') ? missing : 0).fill('0'), ...right].map((word) => parseInt(word, 16));
}
