/**
 * A TCP proxy on 127.0.0.1 between a worker agent and the server that can cut the network
 * between them the way a partition does: bytes stop flowing both ways, but no socket is closed,
 * so neither side receives a FIN or an RST and only its own timers can notice. `heal()` lets the
 * held bytes (and any FIN held behind them) through, in order, as TCP would deliver them once
 * the network is back.
 *
 * Holding is done by not reading (`pause()`): what a side writes waits in kernel buffers and,
 * once they fill, the writer sees backpressure, as on a dead link. Connections opened during the
 * partition are accepted and held the same way (a real SYN would go unanswered; either way the
 * client's connection attempt makes no progress until the heal).
 */
import net from 'node:net';

interface Link {
  readonly client: net.Socket;
  readonly upstream: net.Socket;
}

export class PartitionProxy {
  private readonly links = new Set<Link>();
  private partitioned = false;

  private constructor(private readonly server: net.Server, readonly port: number, private readonly target: { host: string; port: number }) {
    server.on('connection', (client) => this.accept(client));
  }

  static async start(target: { host: string; port: number }): Promise<PartitionProxy> {
    const server = net.createServer({ pauseOnConnect: true });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, '127.0.0.1', () => resolve());
    });
    return new PartitionProxy(server, (server.address() as net.AddressInfo).port, target);
  }

  /** `host:port` for WORKER_CONTROL_PLANE. */
  get address(): string {
    return `127.0.0.1:${this.port}`;
  }

  /** Connections open now (both ends still open). */
  get openConnections(): number {
    return this.links.size;
  }

  /** Stops forwarding in both directions, on open and new connections; closes nothing. */
  partition(): void {
    this.partitioned = true;
    for (const link of this.links) {
      link.client.pause();
      link.upstream.pause();
    }
  }

  /** Forwards again: held bytes first, then whatever follows. */
  heal(): void {
    this.partitioned = false;
    for (const link of this.links) {
      link.client.resume();
      link.upstream.resume();
    }
  }

  async close(): Promise<void> {
    for (const link of this.links) {
      link.client.destroy();
      link.upstream.destroy();
    }
    this.links.clear();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private accept(client: net.Socket): void {
    // Explicitly paused before any 'data' listener, which would otherwise start the flow.
    client.pause();
    const upstream = net.connect({ host: this.target.host, port: this.target.port });
    upstream.pause();
    const link: Link = { client, upstream };
    this.links.add(link);
    const forward = (from: net.Socket, to: net.Socket) => {
      from.on('data', (chunk: Buffer) => {
        if (!to.write(chunk)) from.pause();
      });
      to.on('drain', () => {
        if (!this.partitioned) from.resume();
      });
      // Only after every held byte was read: a FIN never overtakes data.
      from.on('end', () => to.end());
    };
    forward(client, upstream);
    forward(upstream, client);
    const close = () => {
      this.links.delete(link);
      client.destroy();
      upstream.destroy();
    };
    client.on('close', close);
    upstream.on('close', close);
    // Errors end the link (close follows); a reset is what the other side would see anyway.
    client.on('error', () => {});
    upstream.on('error', () => {});
    if (!this.partitioned) {
      client.resume();
      upstream.resume();
    }
  }
}
