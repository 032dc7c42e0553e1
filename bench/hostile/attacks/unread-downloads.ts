/**
 * Unread downloads (issue 33): a file of `downloadBytes` (100 MB) uploaded once (prepare), then
 * `downloads` (25) raw connections each sending `GET /files/{id}/content` and reading nothing,
 * held for the whole phase. At 4102d34 the route read the whole file into memory for each
 * request, outside any bound: 25 of them took the server to 2.6 GB. The answers' status lines
 * are read only when the phase ends.
 */
import net from 'node:net';
import { errorName, round, Tally, type AttackJob, type AttackReport, type HostileAttack } from '../attack';
import { call, multipartFile } from '../http-call';

class UnreadDownloads implements HostileAttack {
  private readonly sockets: net.Socket[] = [];
  private readonly answers = new Tally();
  private fileId = '';
  private uploadSeconds = 0;
  private startedAt = 0;

  constructor(private readonly job: AttackJob) {}

  private get base(): string {
    return `/d/${this.job.target.deployments[0]!.slug}/v1`;
  }

  async prepare(): Promise<void> {
    // Any bytes do for a download; a file of short valid lines is quick to make.
    const line = Buffer.from(`${JSON.stringify({ custom_id: 'x', method: 'POST', url: '/v1/chat/completions', body: { messages: [{ role: 'user', content: 'hello '.repeat(12) }] } })}\n`);
    const data = Buffer.alloc(Math.floor(this.job.settings.downloadBytes / line.length) * line.length);
    for (let offset = 0; offset < data.length; offset += line.length) line.copy(data, offset);
    // Lines must be unique by custom_id only for batches; this file is never a batch's.
    const form = multipartFile(data, 'download.jsonl');
    const startedAt = performance.now();
    const answer = await call({
      port: this.job.target.port, method: 'POST', path: `${this.base}/files`, timeoutMs: 300_000, body: form.parts,
      headers: { authorization: `Bearer ${this.job.target.keys[0]}`, 'content-type': form.contentType },
    });
    this.uploadSeconds = round((performance.now() - startedAt) / 1000);
    if (answer.status !== 200) throw new Error(`uploading the file to download: ${answer.status} ${answer.text.slice(0, 300)}`);
    this.fileId = (JSON.parse(answer.text) as { id: string }).id;
  }

  async go(): Promise<void> {
    this.startedAt = performance.now();
    const request = `GET ${this.base}/files/${this.fileId}/content HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${this.job.target.keys[0]}\r\n\r\n`;
    await Promise.all(Array.from({ length: this.job.settings.downloads }, () => new Promise<void>((resolve) => {
      const socket = net.connect({ host: '127.0.0.1', port: this.job.target.port });
      this.sockets.push(socket);
      // Paused from the start: the kernel's receive buffer fills and then the server's writes wait.
      socket.pause();
      socket.on('error', (error) => {
        this.answers.add(`error ${errorName(error)}`);
        resolve();
      });
      socket.once('connect', () => {
        socket.write(request);
        resolve();
      });
    })));
  }

  async stop(): Promise<AttackReport> {
    const seconds = (performance.now() - this.startedAt) / 1000;
    const held = this.sockets.filter((socket) => !socket.destroyed).length;
    // Only now is anything read: the status line of each answer, then the connection goes.
    await Promise.all(this.sockets.filter((socket) => !socket.destroyed).map((socket) => new Promise<void>((resolve) => {
      const timer = setTimeout(() => {
        this.answers.add('nothing to read after the phase');
        socket.destroy();
        resolve();
      }, 5_000);
      socket.once('data', (chunk: Buffer) => {
        clearTimeout(timer);
        this.answers.add(chunk.toString('latin1', 0, 200).split('\r\n')[0]);
        socket.destroy();
        resolve();
      });
      socket.once('close', () => {
        clearTimeout(timer);
        resolve();
      });
      socket.resume();
    })));
    return {
      achieved: {
        'file': `${round(this.job.settings.downloadBytes / 1e6)} MB, uploaded in ${this.uploadSeconds} s (before the phase)`,
        'downloads held unread': `${held} of ${this.job.settings.downloads}`,
        'bytes read by the attacker': 0,
      },
      answers: this.answers.counts, seconds: round(seconds),
    };
  }
}

export function unreadDownloads(job: AttackJob): HostileAttack {
  return new UnreadDownloads(job);
}
