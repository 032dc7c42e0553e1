import { AppError } from '../../control-plane/errors/app-error';
import { clientNetworkOf, SignInThrottle } from '../../control-plane/rate-limits/sign-in-throttle';

function clock() {
  let now = 1_000_000;
  return { now: () => now, advance: (ms: number) => { now += ms; } };
}

/** What one attempt got: 'ok', or the refusal's Retry-After and which allowance it names. */
function attempt(throttle: SignInThrottle, address: string | undefined): string {
  try {
    throttle.take(address);
    return 'ok';
  } catch (error) {
    if (!(error instanceof AppError) || error.code !== 'rate_limit_error') throw error;
    return `429 after ${error.retryAfterSeconds} s (${/PER_(CLIENT|SERVER)/.exec(error.message)![1].toLowerCase()})`;
  }
}

const windowsOf = (throttle: SignInThrottle) => (throttle as unknown as { clients: Map<string, unknown> }).clients.size;

describe('SignInThrottle', () => {
  it('allows a client its attempts in any minute and refuses the rest, saying when a slot frees', () => {
    const time = clock();
    const throttle = new SignInThrottle({ perClientPerMinute: 3, perServerPerMinute: 100 }, time.now);
    expect([1, 2, 3, 4].map(() => attempt(throttle, '203.0.113.7'))).toEqual(['ok', 'ok', 'ok', '429 after 60 s (client)']);
    time.advance(45_000);
    expect(attempt(throttle, '203.0.113.7')).toBe('429 after 15 s (client)');
    expect(attempt(throttle, '203.0.113.8')).toBe('ok');
    time.advance(15_000);
    expect(attempt(throttle, '203.0.113.7')).toBe('ok');
  });

  it('counts the server\'s attempts from every client together, and a refused new client keeps no memory', () => {
    const time = clock();
    const throttle = new SignInThrottle({ perClientPerMinute: 2, perServerPerMinute: 5 }, time.now);
    const outcomes = ['10.0.0.1', '10.0.0.1', '10.0.0.2', '10.0.0.2', '10.0.0.3', '10.0.0.3', '10.0.0.4'].map((address) => attempt(throttle, address));
    expect(outcomes).toEqual(['ok', 'ok', 'ok', 'ok', 'ok', '429 after 60 s (server)', '429 after 60 s (server)']);
    expect(windowsOf(throttle)).toBe(3);
    for (let index = 0; index < 1000; index++) attempt(throttle, `2001:db8:${index.toString(16)}::1`);
    expect(windowsOf(throttle)).toBe(3);
  });

  it('drops the windows of clients idle for a minute', () => {
    const time = clock();
    const throttle = new SignInThrottle({ perClientPerMinute: 2, perServerPerMinute: 1000 }, time.now);
    for (let index = 0; index < 200; index++) attempt(throttle, `198.51.100.${index}`);
    expect(windowsOf(throttle)).toBe(200);
    time.advance(60_000);
    expect(attempt(throttle, '198.51.100.1')).toBe('ok');
    expect(windowsOf(throttle)).toBe(1);
  });

  it('a client is its IPv4 address (mapped or not) or its IPv6 /64', () => {
    expect(clientNetworkOf('203.0.113.7')).toBe('203.0.113.7');
    expect(clientNetworkOf('::ffff:203.0.113.7')).toBe('203.0.113.7');
    expect(clientNetworkOf('2001:db8:1:2::1')).toBe('2001:db8:1:2::/64');
    expect(clientNetworkOf('2001:db8:1:2:ffff:ffff:ffff:ffff')).toBe('2001:db8:1:2::/64');
    expect(clientNetworkOf('2001:db8:1:3::1')).toBe('2001:db8:1:3::/64');
    expect(clientNetworkOf('::1')).toBe('0:0:0:0::/64');
    expect(clientNetworkOf(undefined)).toBe('an unknown address');
    const throttle = new SignInThrottle({ perClientPerMinute: 1, perServerPerMinute: 100 }, clock().now);
    expect(['2001:db8:1:2::1', '2001:db8:1:2::2', '2001:db8:1:3::1'].map((address) => attempt(throttle, address))).toEqual(['ok', '429 after 60 s (client)', 'ok']);
  });
});
