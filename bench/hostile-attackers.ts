/**
 * The attackers of `bench:hostile`, in a process of their own (forked by run-hostile.ts, one
 * per attack phase), so the ordinary clients' latencies do not include the attackers' own
 * event loop. `attackers` loops, each sending one worst-case body after another (the next as
 * soon as the previous was answered, refused or closed), rotating through the cases from a
 * different starting point, until told to stop. Only ever connects to 127.0.0.1.
 *
 * - HTTP: POST with the body, keep-alive (one socket per attacker; a new one when the server
 *   closed it, or when it answered before reading the whole body: the attacker moves on).
 * - WebSocket, subprotocol graphql-transport-ws, a new connection per attempt:
 *   `ws-before-init` sends the frame at once; `ws-after-init` sends `connection_init` (with the
 *   key when there is one) and the frame after the `connection_ack`, or, without a key, right
 *   behind the init (no ack will come).
 *
 * IPC: {prepare: AttackJob} → {ready}; {go} starts the loops; {stop} aborts what is in flight
 * and answers {stats}. The process exits when the benchmark goes away or at the job's deadline.
 */
import http from 'node:http';
import { WebSocket } from 'ws';
import { percentile } from './paced-client';
import { payload, type Route, type Shape } from './hostile-payloads';

export type Transport = 'http' | 'ws-before-init' | 'ws-after-init';

export interface AttackCase {
  readonly id: string;
  readonly transport: Transport;
  readonly route: Route;
  readonly shape: Shape;
  readonly size: number;
}

export interface AttackJob {
  readonly port: number;
  /** `/d/<slug>/v1/chat/completions` of the deployment. */
  readonly chatPath: string;
  /** A workspace key, or null for phase (a). */
  readonly key: string | null;
  readonly attackers: number;
  readonly cases: AttackCase[];
  /** One attempt is cut (and counted as `timeout`) after this long. */
  readonly timeoutMs: number;
  /** The process stops its loops and exits this long after `go` whatever happens. */
  readonly deadlineMs: number;
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

export interface AttackStats {
  cases: CaseStats[];
  attempts: number;
  /** Attempts still running when the phase ended, aborted then (not in the cases' answers). */
  abortedAtEnd: number;
  seconds: number;
}

interface Outcome { answer: string; ms: number }

/** The GraphQL or OpenAI error code of an answer, if there is one near its start. */
function codeOf(body: string): string {
  return /"code"\s*:\s*"([^"]{1,60})"/.exec(body)?.[1] ?? (/"type"\s*:\s*"([^"]{1,60})"/.exec(body)?.[1] ?? '');
}

const ABORTED = 'aborted at phase end';

class Attack {
  private readonly payloads = new Map<string, Buffer>();
  private readonly inFlight = new Set<() => void>();
  private readonly outcomes = new Map<string, Outcome[]>();
  private readonly aborted = new Map<string, number[]>();
  private stopped = false;
  private startedAt = 0;
  private loops: Promise<void>[] = [];

  constructor(private readonly job: AttackJob) {
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

  go(): void {
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

  async stop(): Promise<AttackStats> {
    this.stopped = true;
    const seconds = (performance.now() - this.startedAt) / 1000;
    for (const abort of [...this.inFlight]) abort();
    await Promise.all(this.loops);
    const cases = this.job.cases.map((attackCase): CaseStats => {
      const outcomes = this.outcomes.get(attackCase.id)!;
      const times = outcomes.map((outcome) => outcome.ms).sort((left, right) => left - right);
      const answers: Record<string, number> = {};
      for (const outcome of outcomes) answers[outcome.answer] = (answers[outcome.answer] ?? 0) + 1;
      return {
        id: attackCase.id, attempts: outcomes.length, answers,
        p50Ms: round(percentile(times, 0.5)), p99Ms: round(percentile(times, 0.99)), maxMs: round(times.at(-1) ?? NaN),
        bytesOffered: outcomes.length * attackCase.size,
        stillRunningAtEnd: this.aborted.get(attackCase.id)!.length,
        stillRunningForMs: this.aborted.get(attackCase.id)!.length ? round(Math.max(...this.aborted.get(attackCase.id)!)) : null,
      };
    });
    return {
      cases, attempts: cases.reduce((sum, entry) => sum + entry.attempts, 0),
      abortedAtEnd: cases.reduce((sum, entry) => sum + entry.stillRunningAtEnd, 0), seconds: round(seconds),
    };
  }
}

function round(value: number): number {
  return Math.round(value * 10) / 10;
}

function worker(): void {
  let attack: Attack | null = null;
  let deadlineMs = 0;
  let stats: Promise<AttackStats> | null = null;
  const stop = () => (stats ??= attack ? attack.stop() : Promise.resolve({ cases: [], attempts: 0, abortedAtEnd: 0, seconds: 0 }));
  process.on('message', (message: { prepare?: AttackJob; go?: true; stop?: true }) => {
    if (message.prepare) {
      attack = new Attack(message.prepare);
      deadlineMs = message.prepare.deadlineMs;
      process.send!({ ready: true });
    } else if (message.go && attack) {
      attack.go();
      // Bounded whatever the benchmark does: the loops stop at the deadline, the process 30 s later.
      setTimeout(() => void stop().then(() => setTimeout(() => process.exit(0), 30_000)), deadlineMs).unref();
    } else if (message.stop) {
      void stop().then((result) => process.send!({ stats: result }));
    }
  });
  process.on('disconnect', () => process.exit(0));
}

if (require.main === module) worker();
