import net from 'node:net';
import { AppError } from '../errors/app-error';
import { ipv6Words } from '../network/ipv6-words';
import { MINUTE_MS } from './rate-limit-decision';
import { SlidingWindowLog } from './sliding-window';

export interface SignInThrottleOptions {
  /** Attempts one client (an IPv4 address, an IPv6 /64) may make in any minute (`CONSOLE_SIGN_IN_PER_CLIENT_PER_MINUTE`). */
  perClientPerMinute: number;
  /** Attempts this server takes in any minute from every client together (`CONSOLE_SIGN_IN_PER_SERVER_PER_MINUTE`). */
  perServerPerMinute: number;
}

interface ClientWindow {
  log: SlidingWindowLog;
  lastCountedAt: number;
}

/**
 * Console sign-in is the one operation a caller without a key can run, and each attempt is a
 * database query: unthrottled, one client made 1,417 a second. Attempts are counted per client
 * and per server in exact sliding minutes (as RPM is) before anything else happens; a refused
 * one costs a map lookup and is answered 429 with Retry-After.
 *
 * The client is the socket's peer address, never a forwarding header: no header is trusted for
 * who a client is anywhere in the gateway (forwarding-headers.ts), and one sent by a client
 * would let it be anyone. Behind a proxy every client is the proxy's address, so they share one
 * allowance. An IPv6 client is its /64: a host commonly holds a whole /64, and counting single
 * addresses would give it 2^64 allowances.
 *
 * Memory is bounded by the server limit: a client's window is first kept when the server admits
 * its attempt, the server admits at most its allowance in any minute, and a window idle for a
 * minute is empty and dropped (swept once a minute).
 */
export class SignInThrottle {
  private readonly clients = new Map<string, ClientWindow>();
  private readonly server: SlidingWindowLog;
  private sweptAt: number;

  constructor(private readonly options: SignInThrottleOptions, private readonly now: () => number = Date.now) {
    this.server = new SlidingWindowLog(options.perServerPerMinute, MINUTE_MS);
    this.sweptAt = now();
  }

  /** Counts one attempt of `clientAddress` (the socket's `remoteAddress`), or throws 429 `rate_limit_error`. */
  take(clientAddress: string | undefined): void {
    const now = this.now();
    this.sweep(now);
    const key = clientNetworkOf(clientAddress);
    const known = this.clients.get(key);
    const client = known ?? { log: new SlidingWindowLog(this.options.perClientPerMinute, MINUTE_MS), lastCountedAt: now };
    // The client's own window first: a client over its allowance never draws on the server's.
    const own = client.log.tryAcquire(now, this.options.perClientPerMinute);
    if (!own.allowed) throw refused(`from ${key}, at most ${this.options.perClientPerMinute} a minute (CONSOLE_SIGN_IN_PER_CLIENT_PER_MINUTE)`, own.resetMs);
    client.lastCountedAt = now;
    const all = this.server.tryAcquire(now, this.options.perServerPerMinute);
    // A new client's window is kept only once the server admitted it, so windows are made at
    // the server's rate whatever the number of addresses asking (a known client's refused
    // attempt stays counted against it).
    if (!all.allowed) throw refused(`on this server, at most ${this.options.perServerPerMinute} a minute from all clients (CONSOLE_SIGN_IN_PER_SERVER_PER_MINUTE)`, all.resetMs);
    if (!known) this.clients.set(key, client);
  }

  /** A client whose last counted attempt left the window holds nothing worth keeping. */
  private sweep(now: number): void {
    if (now - this.sweptAt < MINUTE_MS) return;
    this.sweptAt = now;
    for (const [key, client] of this.clients) {
      if (now - client.lastCountedAt >= MINUTE_MS) this.clients.delete(key);
    }
  }
}

function refused(what: string, resetMs: number): AppError {
  const seconds = Math.max(1, Math.ceil(resetMs / 1000));
  return new AppError('rate_limit_error', `too many console sign-in attempts ${what}; retry in ${seconds} s`, { retryAfterSeconds: seconds });
}

/** Who a client is for counting: its IPv4 address (an IPv4-mapped IPv6 is its IPv4), or its IPv6 /64. */
export function clientNetworkOf(address: string | undefined): string {
  if (!address) return 'an unknown address';
  const text = address.replace(/^::ffff:(?=\d+\.\d+\.\d+\.\d+$)/i, '');
  if (net.isIPv4(text)) return text;
  const words = ipv6Words(text);
  if (!words) return text;
  return `${words.slice(0, 4).map((word) => word.toString(16)).join(':')}::/64`;
}
