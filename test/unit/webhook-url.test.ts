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
    ['https://[2002:5db8:d70e::1]/in', ['2002:5db8:d70e::1']],
    // Embedded public IPv4 is judged as that IPv4: allowed, like the IPv4 itself.
    ['https://[::ffff:0:5db8:d70e]/in', ['::ffff:0:5db8:d70e']],
    ['https://[64:ff9b::5db8:d70e]/in', ['64:ff9b::5db8:d70e']],
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
