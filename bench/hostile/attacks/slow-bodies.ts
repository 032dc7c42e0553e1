/**
 * Slow JSON bodies from a key with zero credit (issue 33): `slowBodies` (500) raw connections,
 * each a `POST …/chat/completions` declaring `slowBodyBytes` (4 MiB) and sending all but the
 * last KiB of it evenly over `slowBodyFillMs`, then one byte a second, never finishing. At
 * 4102d34 the body was read before RPM, TPD and credit were checked: 500 of them took the server
 * to 2.1 GB with 3.7 s stalls. A server that checks first answers (402) before the body is in.
 */
import net from 'node:net';
import { errorName, round, sleep, Tally, type AttackJob, type AttackReport, type HostileAttack } from '../attack';

const CHUNK = 16 * 1024;
const LAST_BYTES = 1024;
/** Connections opened at once while ramping up. */
const OPENING = 100;

interface Slow { socket: net.Socket; sent: number; answered: string | null }

class SlowBodies implements HostileAttack {
  private readonly bodies: Slow[] = [];
  private readonly answers = new Tally();
  private stopped = false;
  private startedAt = 0;
  private pump: Promise<void> | null = null;

  constructor(private readonly job: AttackJob) {}

  private get path(): string {
    const deployment = this.job.target.deployments[0];
    return deployment ? `/d/${deployment.slug}/v1/chat/completions` : this.job.target.tenantChatPath;
  }

  async go(): Promise<void> {
    this.startedAt = performance.now();
    const { slowBodies, slowBodyBytes } = this.job.settings;
    const head = `POST ${this.path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${this.job.target.keys[0]}\r\nContent-Type: application/json\r\nContent-Length: ${slowBodyBytes}\r\n\r\n`;
    for (let opened = 0; opened < slowBodies && !this.stopped; opened += OPENING) {
      await Promise.all(Array.from({ length: Math.min(OPENING, slowBodies - opened) }, () => this.open(head)));
    }
    this.pump = this.fill();
    await this.pump;
  }

  private open(head: string): Promise<void> {
    return new Promise((resolve) => {
      const socket = net.connect({ host: '127.0.0.1', port: this.job.target.port });
      const slow: Slow = { socket, sent: 0, answered: null };
      this.bodies.push(slow);
      socket.on('data', (chunk: Buffer) => {
        if (slow.answered === null) {
          const status = chunk.toString('latin1', 0, 200).split('\r\n')[0].replace(/^HTTP\/1\.1 /, '');
          slow.answered = status;
          this.answers.add(status);
        }
      });
      socket.on('error', (error) => {
        if (slow.answered === null) this.answers.add(`error ${errorName(error)}`);
        slow.answered ??= 'error';
        resolve();
      });
      socket.on('close', () => {
        if (slow.answered === null) this.answers.add('closed by the server');
        slow.answered ??= 'closed';
      });
      socket.once('connect', () => {
        socket.write(head);
        // A JSON body that never ends: the start of a chat request, then its content.
        const start = '{"messages":[{"role":"user","content":"';
        socket.write(start);
        slow.sent = start.length;
        resolve();
      });
    });
  }

  /** Every body gets its share of bytes each tick until only the last KiB is left, then a byte a second. */
  private async fill(): Promise<void> {
    const { slowBodyBytes, slowBodyFillMs } = this.job.settings;
    const filled = slowBodyBytes - LAST_BYTES;
    const chunk = Buffer.alloc(CHUNK, 'a');
    const ticks = Math.max(1, Math.ceil(filled / CHUNK));
    const tickMs = slowBodyFillMs / ticks;
    const started = performance.now();
    for (let tick = 0; tick < ticks && !this.stopped; tick++) {
      for (const slow of this.bodies) {
        if (slow.answered !== null || slow.socket.destroyed) continue;
        const size = Math.min(CHUNK, filled - slow.sent);
        // The kernel and the server take the bytes as fast as the server reads; a server that stopped reading gets no more from here.
        if (size > 0 && slow.socket.writableLength < 4 * CHUNK) {
          slow.socket.write(size === CHUNK ? chunk : chunk.subarray(0, size));
          slow.sent += size;
        }
      }
      const wait = started + (tick + 1) * tickMs - performance.now();
      await (wait > 0 ? sleep(wait) : new Promise((resolve) => setImmediate(resolve)));
    }
    // Held: the rest trickles, a byte a second each, never reaching the declared length.
    void (async () => {
      while (!this.stopped) {
        for (const slow of this.bodies) {
          if (slow.answered === null && !slow.socket.destroyed && slow.sent < slowBodyBytes - 1) {
            slow.socket.write('a');
            slow.sent++;
          }
        }
        await sleep(1_000);
      }
    })();
  }

  async stop(): Promise<AttackReport> {
    this.stopped = true;
    const seconds = (performance.now() - this.startedAt) / 1000;
    const held = this.bodies.filter((slow) => slow.answered === null && !slow.socket.destroyed);
    // Bytes handed to the kernel on these sockets (sent less what still waits in this process); the server's RSS says how much it took.
    const delivered = held.reduce((sum, slow) => sum + slow.sent - slow.socket.writableLength, 0);
    for (const slow of this.bodies) slow.socket.destroy();
    this.answers.add('held unanswered at the end', held.length);
    return {
      achieved: {
        'bodies held unanswered': `${held.length} of ${this.bodies.length}`,
        'MiB written to held bodies (kernel buffers included)': round(delivered / 2 ** 20),
        'declared per body': `${round(this.job.settings.slowBodyBytes / 2 ** 20)} MiB`,
        'target': this.job.target.deployments[0] ? 'the attacker\'s own deployment' : 'the ordinary tenant\'s deployment (the attacker could not create one)',
      },
      answers: this.answers.counts, seconds: round(seconds),
    };
  }
}

export function slowBodies(job: AttackJob): HostileAttack {
  return new SlowBodies(job);
}
