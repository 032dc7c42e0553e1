/**
 * Half-open anonymous connections (issue 33): `halfOpen` (20,000) TCP connections, a share of
 * them sending a partial request line (`GET / HTTP/1.1\r\nHost: x`, never ended) and the rest
 * nothing, all held; one the server closes is opened again, as an attacker would. This process
 * raises no limit: it holds what its own file-descriptor limit (`ulimit -n`, read from
 * /proc/self/limits) leaves it, stops asking for more at its first EMFILE, and says how many it
 * held. At 4102d34 there was no connection cap: 19,980 half-open connections took all 20,000 of
 * the server's descriptors.
 */
import fs from 'node:fs';
import net from 'node:net';
import { errorName, round, sleep, Tally, type AttackJob, type AttackReport, type HostileAttack } from '../attack';

/** Connections being opened at once. */
const OPENING = 1024;

class HalfOpen implements HostileAttack {
  private readonly sockets = new Set<net.Socket>();
  private readonly answers = new Tally();
  /** Connected and not closed. */
  private open = 0;
  private connected = 0;
  private peak = 0;
  private closedByServer = 0;
  /** Set at the first EMFILE: this process holds no more than it held then. */
  private ceiling = Infinity;
  private stopped = false;
  private startedAt = 0;
  private openers: Promise<void>[] = [];
  private addressTurn = 0;

  constructor(private readonly job: AttackJob) {}

  private get wanted(): number {
    return Math.min(this.job.settings.halfOpen, this.ceiling);
  }

  async go(): Promise<void> {
    this.startedAt = performance.now();
    const deadline = performance.now() + this.job.rampMs;
    // The openers keep going after the ramp-up: a connection the server closes is replaced.
    this.openers = Array.from({ length: OPENING }, async () => {
      while (!this.stopped) {
        if (this.sockets.size < this.wanted) await this.connect(Math.random() < this.job.settings.halfOpenPartialShare);
        else await sleep(100);
      }
    });
    while (!this.stopped && performance.now() < deadline && this.open < this.wanted) await sleep(100);
  }

  private connect(partial: boolean): Promise<void> {
    return new Promise((resolve) => {
      // From 100 addresses (127.0.0.2 … .101), as a botnet would: one address alone meets its
      // anonymous share at once (MAX_ANONYMOUS_CONNECTIONS_PER_ADDRESS), and the ordinary tenant,
      // on 127.0.0.1, must not share the attacker's address.
      const localAddress = `127.0.0.${2 + (this.addressTurn++ % 100)}`;
      const socket = net.connect({ host: '127.0.0.1', port: this.job.target.port, localAddress });
      this.sockets.add(socket);
      let open = false;
      // A connection the kernel queued but the server never accepted can wait for minutes: it counts once its handshake is done.
      socket.setTimeout(10_000, () => {
        if (open) return;
        this.answers.add('connect timed out (10 s)');
        socket.destroy();
      });
      socket.once('connect', () => {
        open = true;
        this.open++;
        this.connected++;
        this.peak = Math.max(this.peak, this.open);
        socket.setTimeout(0);
        if (partial) socket.write('GET / HTTP/1.1\r\nHost: x');
        resolve();
      });
      socket.on('data', (chunk: Buffer) => this.answers.add(`answered ${chunk.toString('latin1', 0, 40).split('\r\n')[0]}`));
      socket.on('error', (error) => {
        const name = errorName(error);
        if (name === 'EMFILE' || name === 'ENFILE') this.ceiling = Math.min(this.ceiling, this.sockets.size - 1);
        this.answers.add(`${open ? 'after connect' : 'connect'} error ${name}`);
      });
      socket.on('close', () => {
        this.sockets.delete(socket);
        if (open) {
          this.open--;
          if (!this.stopped) this.closedByServer++;
        }
        resolve();
      });
    });
  }

  async stop(): Promise<AttackReport> {
    this.stopped = true;
    const seconds = (performance.now() - this.startedAt) / 1000;
    const held = this.open;
    for (const socket of this.sockets) socket.destroy();
    await Promise.all(this.openers);
    return {
      achieved: {
        'connections wanted': this.job.settings.halfOpen,
        'held at once (peak)': this.peak,
        'held open at the end': held,
        'connected in all': this.connected,
        'closed by the server (then opened again)': this.closedByServer,
        'attacker fd limit (soft / hard)': fileLimit(),
        ...(Number.isFinite(this.ceiling) ? { 'the attacker\'s own fds ran out at': this.ceiling + 1 } : {}),
      },
      answers: this.answers.counts, seconds: round(seconds),
    };
  }
}

/** This process's RLIMIT_NOFILE, as /proc shows it. */
function fileLimit(): string {
  try {
    const line = fs.readFileSync('/proc/self/limits', 'utf8').split('\n').find((entry) => entry.startsWith('Max open files'));
    const [soft, hard] = line!.replace('Max open files', '').trim().split(/\s+/);
    return `${soft} / ${hard}`;
  } catch {
    return 'unknown';
  }
}

export function halfOpenConnections(job: AttackJob): HostileAttack {
  return new HalfOpen(job);
}
