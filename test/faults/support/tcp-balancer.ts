/**
 * A small TCP load balancer on 127.0.0.1 (nginx's `stream` round robin, in Node): each client
 * connection goes to the next backend in turn and is piped to it byte for byte. A backend
 * that refuses a connection is skipped at once (the connection goes to the next one) and left
 * out of the rotation for `failTimeoutMs` (nginx's `max_fails=1 fail_timeout=…`).
 *
 * It can also report the HTTP/1.1 request lines that pass through it (`onRequestLine`), which
 * fault tests use to see what agents upload without touching the server.
 */
import net from 'node:net';

export interface BalancerBackend {
  readonly port: number;
  /** Client connections piped to this backend so far. */
  connections: number;
  /** Connects it refused (or that timed out). */
  failedConnects: number;
  /** Skipped without trying until then (ms since the epoch). */
  downUntil: number;
}

export interface TcpBalancerOptions {
  readonly backends?: readonly number[];
  /** How long a backend that refused a connect stays out of the rotation. @default 1000 */
  readonly failTimeoutMs?: number;
  /** A connect taking longer than this counts as refused. @default 1000 */
  readonly connectTimeoutMs?: number;
  /** Called with each request line sent by clients (`PUT`, `/files/…?…`). */
  readonly onRequestLine?: (method: string, target: string) => void;
}

const REQUEST_LINE = /(GET|POST|PUT|DELETE|PATCH|HEAD|OPTIONS) (\/[^\s]*) HTTP\/1\.[01]\r\n/g;
/** Bytes kept from one chunk to the next, so a request line split across chunks is still seen. */
const CARRY_BYTES = 4096;

export class TcpBalancer {
  private backendList: BalancerBackend[] = [];
  private next = 0;
  private readonly sockets = new Set<net.Socket>();
  /** Client connections no backend took (every one refused). */
  refused = 0;

  private constructor(private readonly server: net.Server, readonly port: number, private readonly options: TcpBalancerOptions) {
    this.setBackends(options.backends ?? []);
  }

  static async start(options: TcpBalancerOptions = {}): Promise<TcpBalancer> {
    const server = net.createServer();
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, '127.0.0.1', resolve);
    });
    const balancer = new TcpBalancer(server, (server.address() as net.AddressInfo).port, options);
    server.on('connection', (client) => balancer.handle(client));
    return balancer;
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  get backends(): readonly BalancerBackend[] {
    return this.backendList;
  }

  setBackends(ports: readonly number[]): void {
    this.backendList = ports.map((port) => ({ port, connections: 0, failedConnects: 0, downUntil: 0 }));
  }

  /** Stops listening and cuts every connection still open. */
  async close(): Promise<void> {
    for (const socket of this.sockets) socket.destroy();
    await new Promise((resolve) => this.server.close(resolve));
  }

  private handle(client: net.Socket): void {
    this.track(client);
    client.on('error', () => {});
    client.pause();
    // Round robin; backends that refused lately go last (tried only when every other one failed).
    const start = this.next++;
    const now = Date.now();
    const order = this.backendList.map((_, index) => this.backendList[(start + index) % this.backendList.length])
      .sort((left, right) => Number(left.downUntil > now) - Number(right.downUntil > now));
    const attempt = (index: number) => {
      if (client.destroyed) return;
      const backend = order[index];
      if (!backend) {
        this.refused++;
        client.destroy();
        return;
      }
      const upstream = net.connect({ host: '127.0.0.1', port: backend.port });
      this.track(upstream);
      const timer = setTimeout(() => upstream.destroy(new Error('connect timeout')), this.options.connectTimeoutMs ?? 1_000);
      // Before 'connect' only: a refused (or timed-out) connect moves on to the next backend.
      upstream.once('error', () => {
        clearTimeout(timer);
        backend.failedConnects++;
        backend.downUntil = Date.now() + (this.options.failTimeoutMs ?? 1_000);
        attempt(index + 1);
      });
      upstream.once('connect', () => {
        clearTimeout(timer);
        if (client.destroyed) {
          upstream.destroy();
          return;
        }
        backend.connections++;
        upstream.removeAllListeners('error');
        upstream.on('error', () => client.destroy());
        client.on('error', () => upstream.destroy());
        upstream.on('close', () => client.destroy());
        client.on('close', () => upstream.destroy());
        if (this.options.onRequestLine) this.sniff(client);
        client.pipe(upstream);
        upstream.pipe(client);
        client.resume();
      });
    };
    attempt(0);
  }

  private sniff(client: net.Socket): void {
    const report = this.options.onRequestLine!;
    let carry = '';
    client.on('data', (chunk: Buffer) => {
      const text = carry + chunk.toString('latin1');
      let end = 0;
      for (const match of text.matchAll(REQUEST_LINE)) {
        report(match[1], match[2]);
        end = match.index! + match[0].length;
      }
      carry = text.slice(Math.max(end, text.length - CARRY_BYTES));
    });
  }

  /** The port refuses connections (nothing listens there any more). */
  static refuses(port: number): Promise<boolean> {
    return new Promise((resolve) => {
      const socket = net.connect({ host: '127.0.0.1', port });
      socket.once('connect', () => {
        socket.destroy();
        resolve(false);
      });
      socket.once('error', (error: NodeJS.ErrnoException) => resolve(error.code === 'ECONNREFUSED'));
    });
  }

  private track(socket: net.Socket): void {
    this.sockets.add(socket);
    socket.once('close', () => this.sockets.delete(socket));
  }
}
