/**
 * Issue 19's attack: worst-case bodies from `attackers` loops, each sending one after another
 * (the next as soon as the previous was answered, refused or closed), rotating through the
 * cases from a different starting point, without a key (phase `anonymous`) or with a second key
 * of the ordinary tenant's own workspace (`keyed`).
 *
 * - HTTP: POST with the body, keep-alive (one socket per attacker; a new one when the server
 *   closed it, or when it answered before reading the whole body: the attacker moves on).
 * - WebSocket, subprotocol graphql-transport-ws, a new connection per attempt:
 *   `ws-before-init` sends the frame at once; `ws-after-init` sends `connection_init` (with the
 *   key when there is one) and the frame after the `connection_ack`, or, without a key, right
 *   behind the init (no ack will come).
 */
import http from 'node:http';
import { WebSocket } from 'ws';
import { percentile } from '../../paced-client';
import { codeOf, round, type AttackJob, type AttackReport, type HostileAttack } from '../attack';
import { depthOf, payload, typenameTokens, type Route, type Shape } from '../payloads';

export type Transport = 'http' | 'ws-before-init' | 'ws-after-init';

export interface AttackCase {
  readonly id: string;
  readonly transport: Transport;
  readonly route: Route;
  readonly shape: Shape;
  readonly size: number;
}

/** What the loops need: where to send, with which key (null: none), the cases. */
interface BombJob {
  readonly port: number;
  readonly chatPath: string;
  readonly key: string | null;
  readonly attackers: number;
  readonly cases: AttackCase[];
  /** One attempt is cut (and counted as `timeout`) after this long. */
  readonly timeoutMs: number;
}

export interface CaseStats {
  id: string;
  attempts: number;
  /** How the attempts ended: `401 invalid_api_key`, `413 body_too_large`, `close 4400`, `error ECONNRESET`, `timeout`, … */
  answers: Record<string, number>;
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
  bytesOffered: number;
  /** Attempts of this case still running when the phase ended (aborted then, not in the numbers above), and the longest had run this long. */
  stillRunningAtEnd: number;
  stillRunningForMs: number | null;
}

interface Outcome { answer: string; ms: number }

const ABORTED = 'aborted at phase end';

class BodyBombs implements HostileAttack {
  private readonly payloads = new Map<string, Buffer>();
  private readonly inFlight = new Set<() => void>();
  private readonly outcomes = new Map<string, Outcome[]>();
  private readonly aborted = new Map<string, number[]>();
  private stopped = false;
  private startedAt = 0;
  private loops: Promise<void>[] = [];

  constructor(private readonly job: BombJob) {
    for (const attackCase of job.cases) {
      const key = this.payloadKey(attackCase);
      if (!this.payloads.has(key)) this.payloads.set(key, payload(attackCase.shape, attackCase.route, attackCase.size));
      this.outcomes.set(attackCase.id, []);
      this.aborted.set(attackCase.id, []);
    }
  }

  /** Chat and GraphQL share the nested bodies (the same bytes), and WebSocket frames too. */
  private payloadKey(attackCase: AttackCase): string {
    const route = attackCase.shape.startsWith('nested') ? 'any' : attackCase.route;
    return `${attackCase.shape}|${route}|${attackCase.size}`;
  }

  async go(): Promise<void> {
    this.startedAt = performance.now();
    const { attackers, cases } = this.job;
    this.loops = Array.from({ length: attackers }, (_, index) => this.loop(Math.floor((index * cases.length) / attackers)));
  }

  private async loop(start: number): Promise<void> {
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    let position = start;
    try {
      while (!this.stopped) {
        const attackCase = this.job.cases[position++ % this.job.cases.length];
        const outcome = await this.attempt(attackCase, agent);
        if (outcome.answer === ABORTED) this.aborted.get(attackCase.id)!.push(outcome.ms);
        else this.outcomes.get(attackCase.id)!.push(outcome);
        // A server that refuses at once must not starve this process's IPC (the stop message).
        await new Promise((resolve) => setImmediate(resolve));
      }
    } finally {
      agent.destroy();
    }
  }

  private attempt(attackCase: AttackCase, agent: http.Agent): Promise<Outcome> {
    const body = this.payloads.get(this.payloadKey(attackCase))!;
    if (attackCase.transport === 'http') return this.post(attackCase.route === 'graphql' ? '/graphql' : this.job.chatPath, body, agent);
    return this.websocket(body, attackCase.transport === 'ws-after-init');
  }

  /** Settles once; registers an abort for the phase's end and a timeout. */
  private bounded(start: (finish: (answer: string) => void) => () => void): Promise<Outcome> {
    return new Promise((resolve) => {
      const startedAt = performance.now();
      let settled = false;
      let cut: () => void = () => {};
      const finish = (answer: string) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        this.inFlight.delete(abort);
        resolve({ answer, ms: performance.now() - startedAt });
      };
      const abort = () => {
        finish(ABORTED);
        cut();
      };
      const timer = setTimeout(() => {
        finish('timeout');
        cut();
      }, this.job.timeoutMs);
      this.inFlight.add(abort);
      cut = start(finish);
    });
  }

  private post(path: string, body: Buffer, agent: http.Agent): Promise<Outcome> {
    return this.bounded((finish) => {
      const headers: http.OutgoingHttpHeaders = { 'content-type': 'application/json', 'content-length': body.length };
      if (this.job.key) headers.authorization = `Bearer ${this.job.key}`;
      const request = http.request({ host: '127.0.0.1', port: this.job.port, path, method: 'POST', agent, headers }, (response) => {
        let text = '';
        response.setEncoding('latin1');
        response.on('data', (part: string) => {
          if (text.length < 4096) text += part.slice(0, 4096);
        });
        response.on('end', () => {
          // Answered before taking the whole body: this attacker does not wait to finish sending it.
          if (!request.writableFinished) request.destroy();
          finish(`${response.statusCode} ${codeOf(text)}`.trim());
        });
        response.on('error', (error: NodeJS.ErrnoException) => finish(`${response.statusCode} then cut (${error.code ?? error.message})`));
        response.on('close', () => finish(`${response.statusCode} then closed`));
      });
      request.on('error', (error: NodeJS.ErrnoException) => finish(`error ${error.code ?? error.message}`));
      request.end(body);
      return () => request.destroy();
    });
  }

  private websocket(frame: Buffer, afterInit: boolean): Promise<Outcome> {
    return this.bounded((finish) => {
      const socket = new WebSocket(`ws://127.0.0.1:${this.job.port}/graphql`, 'graphql-transport-ws', { perMessageDeflate: false, handshakeTimeout: this.job.timeoutMs });
      let sent = false;
      let error = '';
      const send = () => {
        sent = true;
        socket.send(frame, { binary: false });
      };
      socket.on('open', () => {
        if (!afterInit) return send();
        socket.send(JSON.stringify({ type: 'connection_init', payload: this.job.key ? { authorization: `Bearer ${this.job.key}` } : {} }));
        if (!this.job.key) send();
      });
      socket.on('message', (data) => {
        if (afterInit && !sent && String(data).includes('"connection_ack"')) send();
      });
      socket.on('unexpected-response', (request, response) => {
        finish(`http ${response.statusCode}`);
        request.destroy();
      });
      socket.on('error', (cause: NodeJS.ErrnoException) => (error = cause.code ?? cause.message));
      socket.on('close', (code) => finish(`close ${code}${error ? ` (${error})` : ''}${sent ? '' : ' before the frame was sent'}`));
      return () => socket.terminate();
    });
  }

  async stop(): Promise<AttackReport> {
    this.stopped = true;
    const seconds = (performance.now() - this.startedAt) / 1000;
    for (const abort of [...this.inFlight]) abort();
    await Promise.all(this.loops);
    const answers: Record<string, number> = {};
    const cases = this.job.cases.map((attackCase): CaseStats => {
      const outcomes = this.outcomes.get(attackCase.id)!;
      const times = outcomes.map((outcome) => outcome.ms).sort((left, right) => left - right);
      const mine: Record<string, number> = {};
      for (const outcome of outcomes) {
        mine[outcome.answer] = (mine[outcome.answer] ?? 0) + 1;
        answers[outcome.answer] = (answers[outcome.answer] ?? 0) + 1;
      }
      return {
        id: attackCase.id, attempts: outcomes.length, answers: mine,
        p50Ms: round(percentile(times, 0.5)), p99Ms: round(percentile(times, 0.99)), maxMs: round(times.at(-1) ?? NaN),
        bytesOffered: outcomes.length * attackCase.size,
        stillRunningAtEnd: this.aborted.get(attackCase.id)!.length,
        stillRunningForMs: this.aborted.get(attackCase.id)!.length ? round(Math.max(...this.aborted.get(attackCase.id)!)) : null,
      };
    });
    const attempts = cases.reduce((sum, entry) => sum + entry.attempts, 0);
    const abortedAtEnd = cases.reduce((sum, entry) => sum + entry.stillRunningAtEnd, 0);
    return {
      achieved: { 'bodies answered': attempts, 'per second': round(attempts / seconds), 'still running at the end': abortedAtEnd },
      answers, seconds: round(seconds),
      details: cases.map((entry, index) => ({ ...entry, depth: depthOf(this.job.cases[index].shape, this.job.cases[index].size), typenameTokens: this.job.cases[index].shape === 'typename' ? typenameTokens(this.job.cases[index].size) : undefined })),
    };
  }
}

/** The 13 kinds of issue 19 at each size. */
export function bodyBombCases(sizes: number[]): AttackCase[] {
  const kinds: Array<{ transport: Transport; route: Route; shape: Shape }> = [
    { transport: 'http', route: 'graphql', shape: 'nested-array' },
    { transport: 'ws-before-init', route: 'graphql', shape: 'nested-array' },
    { transport: 'http', route: 'chat', shape: 'nested-array' },
    { transport: 'http', route: 'graphql', shape: 'typename' },
    { transport: 'http', route: 'graphql', shape: 'nested-object' },
    { transport: 'ws-after-init', route: 'graphql', shape: 'nested-array' },
    { transport: 'http', route: 'chat', shape: 'nested-object' },
    { transport: 'http', route: 'graphql', shape: 'huge-string' },
    { transport: 'ws-before-init', route: 'graphql', shape: 'nested-object' },
    { transport: 'http', route: 'chat', shape: 'huge-array' },
    { transport: 'ws-after-init', route: 'graphql', shape: 'nested-object' },
    { transport: 'http', route: 'graphql', shape: 'huge-array' },
    { transport: 'http', route: 'chat', shape: 'huge-string' },
  ];
  return kinds.flatMap((kind) => sizes.map((size) => {
    const where = kind.transport === 'http' ? `POST ${kind.route === 'graphql' ? '/graphql' : 'chat'}` : `${kind.transport === 'ws-before-init' ? 'WS frame before' : 'WS frame after'} connection_init`;
    return { ...kind, size, id: `${where}, ${kind.shape}, ${sizeText(size)}` };
  }));
}

export function sizeText(bytes: number): string {
  const MiB = 1024 * 1024;
  if (bytes % MiB === 0) return `${bytes / MiB} MiB`;
  if (bytes % 1024 === 0) return `${bytes / 1024} KiB`;
  return `${bytes} B`;
}

/** The body bombs at the ordinary tenant's deployment, with the attacker's key when it has one (phase `keyed`). */
export function bodyBombs(job: AttackJob): HostileAttack {
  return new BodyBombs({
    port: job.target.port, chatPath: job.target.tenantChatPath, key: job.target.keys[0] ?? null, attackers: job.settings.attackers,
    cases: bodyBombCases(job.settings.sizes), timeoutMs: job.settings.timeoutMs,
  });
}
