import { AppError } from '../../control-plane/errors/app-error';
import type { HostResolver } from '../../control-plane/network/public-host';
import { checkWebhookUrl } from '../../control-plane/network/webhook-url';

/** DNS is a boundary we do not own (and this sandbox has no public DNS): a fixed table. */
const dns: Record<string, string[]> = {
  'hooks.example.com': ['93.184.215.14'],
  'api.customer.io': ['2606:4700::6810:84e5', '104.16.132.229'],
  'rebind.attacker.net': ['93.184.215.14', '10.0.0.5'],
  'metadata.attacker.net': ['169.254.169.254'],
  'v6-loopback.attacker.net': ['::1'],
  'v6-reserved.attacker.net': ['2606:4700::6810:84e5', '::1:0:0:1'],
  'srv6.attacker.net': ['5f00::1'],
  'sixtofour.attacker.net': ['2002:5db8:d70e::1'],
  'mapped.attacker.net': ['::ffff:93.184.215.14'],
  'dns64.customer.io': ['64:ff9b::5db8:d70e'],
};
const resolve: HostResolver = async (hostname) => {
  const addresses = dns[hostname];
  if (!addresses) throw new Error('ENOTFOUND');
  return addresses;
};
const strict = { resolve, allowInsecureLoopback: false };

describe('webhook_url validation (public HTTPS only)', () => {
  const bad: Array<[string, unknown, string]> = [
    ['plain http', 'http://hooks.example.com/in', "scheme 'http'"],
    ['ftp', 'ftp://hooks.example.com/in', "scheme 'ftp'"],
    ['javascript', 'javascript:alert(1)', "scheme 'javascript'"],
    ['not a URL', 'hooks.example.com/in', 'not a valid absolute URL'],
    ['empty', '', 'non-empty string'],
    ['not a string', 42, 'non-empty string'],
    ['credentials', 'https://user:pass@hooks.example.com/in', 'credentials'],
    ['localhost', 'https://localhost/in', "'localhost' is not a public host name"],
    ['loopback IPv4', 'https://127.0.0.1/in', 'private'],
    ['loopback decimal', 'https://2130706433/in', 'private'],
    ['loopback IPv6', 'https://[::1]/in', 'private'],
    ['IPv4-mapped loopback', 'https://[::ffff:127.0.0.1]/in', 'private'],
    ['private 10/8', 'https://10.1.2.3/in', 'private'],
    ['private 172.16/12', 'https://172.20.0.1/in', 'private'],
    ['private 192.168/16', 'https://192.168.1.1/in', 'private'],
    ['CGNAT', 'https://100.64.0.1/in', 'private'],
    ['link-local / cloud metadata', 'https://169.254.169.254/latest/meta-data', 'private'],
    ['AWS IPv6 metadata', 'https://[fd00:ec2::254]/', 'private'],
    ['IPv6 link-local', 'https://[fe80::1]/', 'private'],
    ['6to4 carrying loopback', 'https://[2002:7f00:1::1]/', 'private'],
    ['6to4 carrying metadata', 'https://[2002:a9fe:a9fe::1]/', 'private'],
    ['local-use NAT64', 'https://[64:ff9b:1::a00:1]/', 'private'],
    ['IPv4-translated loopback', 'https://[::ffff:0:7f00:1]/h', 'private'],
    ['IPv4-translated metadata', 'https://[::ffff:0:169.254.169.254]/h', 'private'],
    ['IPv4-translated private 10/8', 'https://[::ffff:0:a00:5]/h', 'private'],
    ['IPv4-compatible loopback', 'https://[::127.0.0.1]/h', 'private'],
    ['IPv4-compatible private 192.168/16', 'https://[::c0a8:101]/h', 'private'],
    ['NAT64 carrying loopback', 'https://[64:ff9b::7f00:1]/h', 'private'],
    ['NAT64 carrying metadata', 'https://[64:ff9b::169.254.169.254]/h', 'private'],
    ['Teredo', 'https://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/h', 'private'],
    ['Teredo carrying loopback as its server', 'https://[2001:0:7f00:1::1]/h', 'private'],
    ['unspecified', 'https://0.0.0.0/', 'private'],
    // IPv6 is an allow-list: global unicast 2000::/3 outside the special-purpose blocks, or NAT64 of a public IPv4.
    ['::/8 outside every named form', 'https://[::1:0:0:1]/h', 'private'],
    ['::/8 next to the mapped prefix', 'https://[::fffe:5db8:d70e]/h', 'private'],
    ['IPv4-mapped public address', 'https://[::ffff:93.184.215.14]/h', 'private'],
    ['IPv4-translated public address', 'https://[::ffff:0:5db8:d70e]/h', 'private'],
    ['IPv4-compatible public address', 'https://[::5db8:d70e]/h', 'private'],
    ['discard-only 100::/64', 'https://[100::1]/h', 'private'],
    ['100::/8 outside discard-only', 'https://[100:0:0:2::1]/h', 'private'],
    ['reserved 4000::/3', 'https://[4000::1]/h', 'private'],
    ['SRv6 SIDs 5f00::/16', 'https://[5f00::1]/h', 'private'],
    ['reserved e000::/4', 'https://[e000::1]/h', 'private'],
    ['reserved fe00::/9', 'https://[fe00::1]/h', 'private'],
    ['site-local fec0::/10', 'https://[fec0::1]/h', 'private'],
    ['multicast', 'https://[ff02::1]/h', 'private'],
    ['documentation 2001:db8::/32', 'https://[2001:db8::1]/h', 'private'],
    ['documentation 3fff::/20', 'https://[3fff::1]/h', 'private'],
    ['benchmarking 2001:2::/48', 'https://[2001:2::1]/h', 'private'],
    ['ORCHID 2001:10::/28', 'https://[2001:10::1]/h', 'private'],
    ['ORCHIDv2 2001:20::/28', 'https://[2001:20::1]/h', 'private'],
    ['PCP anycast 2001:1::1', 'https://[2001:1::1]/h', 'private'],
    ['AS112 direct delegation 2620:4f:8000::/48', 'https://[2620:4f:8000::1]/h', 'private'],
    ['6to4 of a public address', 'https://[2002:5db8:d70e::1]/h', 'private'],
    ['local-use NAT64 of a public address', 'https://[64:ff9b:1::5db8:d70e]/h', 'private'],
    ['NAT64 carrying private 10/8', 'https://[64:ff9b::a00:5]/h', 'private'],
    ['name with one ::/8 answer', 'https://v6-reserved.attacker.net/in', 'resolves to ::1:0:0:1'],
    ['name resolving to an SRv6 SID', 'https://srv6.attacker.net/in', 'resolves to 5f00::1'],
    ['name resolving to 6to4', 'https://sixtofour.attacker.net/in', 'resolves to 2002:5db8:d70e::1'],
    ['name resolving to an IPv4-mapped address', 'https://mapped.attacker.net/in', 'resolves to ::ffff:93.184.215.14'],
    ['internal name', 'https://metadata.google.internal/computeMetadata', 'not a public host name'],
    ['single-label name', 'https://intranet/hook', 'not a public host name'],
    ['name resolving to metadata', 'https://metadata.attacker.net/in', 'resolves to 169.254.169.254'],
    ['name with one private answer (rebinding)', 'https://rebind.attacker.net/in', 'resolves to 10.0.0.5'],
    ['name resolving to ::1', 'https://v6-loopback.attacker.net/in', 'resolves to ::1'],
    ['unresolvable name', 'https://nowhere.invalid-tld-for-tests.com/in', 'does not resolve'],
    ['too long', `https://hooks.example.com/${'a'.repeat(2100)}`, 'longer than'],
  ];

  it.each(bad)('refuses %s with 422 invalid_webhook_url', async (_name, url, why) => {
    const error = await checkWebhookUrl(url, strict).catch((caught) => caught);
    expect(error).toBeInstanceOf(AppError);
    expect(error).toMatchObject({ code: 'invalid_webhook_url', param: 'webhook_url' });
    expect(error.message).toContain(why);
  });

  it.each([
    ['https://hooks.example.com/in', ['93.184.215.14']],
    ['https://api.customer.io:8443/webhooks?tenant=7', ['2606:4700::6810:84e5', '104.16.132.229']],
    ['https://93.184.215.14/in', ['93.184.215.14']],
    ['https://[2606:4700::6810:84e5]/in', ['2606:4700::6810:84e5']],
    ['https://[2a00:1450:4001:82a::200e]/in', ['2a00:1450:4001:82a::200e']],
    // NAT64 (an IPv6-only host's DNS64 answer for an IPv4-only receiver) is judged by its IPv4.
    ['https://[64:ff9b::5db8:d70e]/in', ['64:ff9b::5db8:d70e']],
    ['https://[64:ff9b::93.184.215.14]/in', ['64:ff9b::5db8:d70e']],
    ['https://dns64.customer.io/in', ['64:ff9b::5db8:d70e']],
  ])('accepts %s and returns the addresses to connect to', async (url, addresses) => {
    const checked = await checkWebhookUrl(url, strict);
    expect(checked.url.toString()).toBe(new URL(url).toString());
    expect(checked.addresses).toEqual(addresses);
  });

  it('allows plain-HTTP loopback receivers only when the development switch is on', async () => {
    await expect(checkWebhookUrl('http://127.0.0.1:4000/hook', strict)).rejects.toMatchObject({ code: 'invalid_webhook_url' });
    const relaxed = { resolve, allowInsecureLoopback: true };
    expect((await checkWebhookUrl('http://127.0.0.1:4000/hook', relaxed)).addresses).toEqual(['127.0.0.1']);
    expect((await checkWebhookUrl('http://localhost:4000/hook', relaxed)).addresses).toEqual(['127.0.0.1']);
    await expect(checkWebhookUrl('http://10.0.0.1/hook', relaxed)).rejects.toMatchObject({ code: 'invalid_webhook_url' });
    await expect(checkWebhookUrl('http://hooks.example.com/hook', relaxed)).rejects.toMatchObject({ code: 'invalid_webhook_url' });
  });
});
