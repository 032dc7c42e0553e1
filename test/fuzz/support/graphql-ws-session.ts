import fc from 'fast-check';
import WebSocket from 'ws';
import { graphqlErrorsProblem, leakedInternals } from './answer-checks';
import { stringifyJson, anyHostile } from './hostile-values';

interface Outcome {
  messages: Array<{ type: string; payload?: unknown }>;
  closed: { code: number; reason: string } | null;
  /** Neither an error nor a complete came within the quiet time (a subscription that runs). */
  running: boolean;
}

/** graphql-ws close codes that mean the server failed, not the client. */
const SERVER_FAILURE_CODES = [1011, 4500];

/**
 * One graphql-transport-ws connection that runs many operations, one after another, each
 * under its own id (opening a socket per case would cost more than the case). A subscription
 * still quiet after `quietMs` is running: it is completed by the client and counts as accepted.
 */
export class WebSocketSession {
  private socket: WebSocket | null = null;
  private nextId = 0;
  private listener: ((message: { id?: string; type: string; payload?: unknown }) => void) | null = null;
  private closed: ((close: { code: number; reason: string }) => void) | null = null;

  constructor(private readonly url: string, private readonly authorization: string) {}

  private async connect(): Promise<WebSocket> {
    if (this.socket && this.socket.readyState === WebSocket.OPEN) return this.socket;
    const socket = new WebSocket(`${this.url.replace(/^http/, 'ws')}/graphql`, 'graphql-transport-ws');
    await new Promise<void>((resolve, reject) => {
      socket.once('error', reject);
      socket.on('open', () => socket.send(JSON.stringify({ type: 'connection_init', payload: { authorization: this.authorization } })));
      socket.on('message', (data) => {
        const message = JSON.parse(data.toString()) as { id?: string; type: string; payload?: unknown };
        if (message.type === 'connection_ack') return resolve();
        if (message.type === 'ping') return socket.send(JSON.stringify({ type: 'pong' }));
        this.listener?.(message);
      });
      socket.on('close', (code, reason) => {
        this.closed?.({ code, reason: reason.toString() });
        reject(new Error(`closed ${code} ${reason.toString()} before connection_ack`));
      });
    });
    socket.removeAllListeners('error');
    socket.on('error', () => {});
    this.socket = socket;
    return socket;
  }

  async run(payload: Record<string, unknown>, quietMs: number): Promise<Outcome> {
    const socket = await this.connect();
    const id = String(++this.nextId);
    const outcome: Outcome = { messages: [], closed: null, running: false };
    await new Promise<void>((resolve) => {
      const timer = setTimeout(() => {
        outcome.running = true;
        if (socket.readyState === WebSocket.OPEN) socket.send(JSON.stringify({ id, type: 'complete' }));
        done();
      }, quietMs);
      const done = () => {
        clearTimeout(timer);
        this.listener = null;
        this.closed = null;
        resolve();
      };
      this.listener = (message) => {
        if (message.id !== id) return;
        outcome.messages.push({ type: message.type, payload: message.payload });
        if (message.type === 'error' || message.type === 'complete') done();
      };
      this.closed = (close) => {
        outcome.closed = close;
        this.socket = null;
        done();
      };
      socket.send(stringifyJson({ id, type: 'subscribe', payload })!);
    });
    return outcome;
  }

  close(): void {
    this.socket?.terminate();
    this.socket = null;
  }
}

/** Null when what the server sent for an operation keeps the contract (errors with codes, no internals, no server-side close). */
export function webSocketProblem(outcome: Outcome): string | null {
  // A message nested past the JSON depth limit is not read at all (it would be built before
  // anything could refuse it): the socket is closed with 4400 naming the limit, as graphql-ws
  // closes for any message it cannot read. Only that reason is a client's fault.
  if (outcome.closed?.code === 4400 && /nests more than \d+ levels deep/.test(outcome.closed.reason)) return null;
  if (outcome.closed) return `the server closed the socket: ${outcome.closed.code} ${outcome.closed.reason}`;
  for (const message of outcome.messages) {
    const leak = leakedInternals(JSON.stringify(message.payload) ?? '');
    if (leak) return `a ${message.type} message shows ${leak}`;
    if (message.type === 'error') {
      const problem = graphqlErrorsProblem(message.payload);
      if (problem) return `error message: ${problem}`;
    }
    if (message.type === 'next') {
      const errors = (message.payload as { errors?: unknown } | undefined)?.errors;
      if (errors !== undefined) {
        const problem = graphqlErrorsProblem(errors);
        if (problem) return `next message: ${problem}`;
      }
    }
  }
  return null;
}

/** A whole connection that breaks the protocol: bad init payloads, messages out of order, frames that are not messages. */
export interface ProtocolCase {
  subprotocol: string | null;
  init: unknown | 'none';
  frames: Array<string | Buffer>;
}

export function protocolCases(ownerAuthorization: string): fc.Arbitrary<ProtocolCase> {
  const valid = { type: 'subscribe', id: '1', payload: { query: '{ __typename }' } };
  const frame = fc.oneof(
    fc.constantFrom<string | Buffer>(
      JSON.stringify(valid), JSON.stringify(valid), JSON.stringify({ type: 'ping' }), JSON.stringify({ type: 'pong' }), JSON.stringify({ type: 'complete', id: '9' }),
      JSON.stringify({ type: 'connection_init' }), JSON.stringify({ type: 'subscribe' }), JSON.stringify({ type: 'subscribe', id: 1, payload: {} }),
      JSON.stringify({ type: 'subscribe', id: '2', payload: { query: 5 } }), JSON.stringify({ type: 'subscribe', id: '3', payload: null }),
      JSON.stringify({ type: 'subscribe', id: '', payload: { query: '{ __typename }' } }), JSON.stringify({ type: 'next', id: '1', payload: {} }),
      JSON.stringify({ type: 'nope' }), JSON.stringify([]), JSON.stringify(null), '{', '', 'x'.repeat(70_000), Buffer.from([0xff, 0xfe, 0x00]),
      JSON.stringify({ type: 'subscribe', id: '4', payload: { query: 'subscription { deploymentUpdated { id } }' } }),
      JSON.stringify({ type: 'subscribe', id: '5', payload: { query: '{ __typename }', variables: [] } }),
    ),
    anyHostile.map((value) => stringifyJson({ type: 'subscribe', id: 'h', payload: value }) ?? ''),
    anyHostile.map((value) => stringifyJson(value) ?? ''),
  );
  return fc.record({
    subprotocol: fc.constantFrom<string | null>('graphql-transport-ws', 'graphql-transport-ws', 'graphql-ws', null),
    init: fc.oneof(
      { arbitrary: fc.constant<unknown>({ authorization: ownerAuthorization }), weight: 4 },
      { arbitrary: fc.constantFrom<unknown>('none', null, {}, { authorization: 5 }, { Authorization: 'Bearer mk-bad' }, 'x', [], { authorization: `Bearer ${'a'.repeat(5_000)}` }), weight: 2 },
      { arbitrary: anyHostile, weight: 1 },
    ),
    frames: fc.array(frame, { minLength: 1, maxLength: 4 }),
  });
}

/**
 * Runs a protocol case on a new socket for a short while. Any close is fine (4400 bad request,
 * 4401/4403 auth, 4409 duplicate id, 4429 init twice…) except the server's own failures.
 */
export async function runProtocolCase(url: string, testCase: ProtocolCase, listenMs: number): Promise<string | null> {
  const socket = testCase.subprotocol ? new WebSocket(`${url.replace(/^http/, 'ws')}/graphql`, testCase.subprotocol) : new WebSocket(`${url.replace(/^http/, 'ws')}/graphql`);
  const messages: unknown[] = [];
  let closeCode: number | null = null;
  await new Promise<void>((resolve) => {
    const finish = () => {
      clearTimeout(timer);
      socket.removeAllListeners();
      socket.on('error', () => {});
      socket.terminate();
      resolve();
    };
    const timer = setTimeout(finish, listenMs);
    socket.on('error', finish);
    socket.on('close', (code) => {
      closeCode = code;
      finish();
    });
    socket.on('message', (data) => {
      try {
        messages.push(JSON.parse(data.toString()));
      } catch {
        messages.push(data.toString());
      }
    });
    socket.on('open', () => {
      if (testCase.init !== 'none') socket.send(stringifyJson({ type: 'connection_init', payload: testCase.init }) ?? '');
      for (const frame of testCase.frames) socket.send(frame);
    });
  });
  if (closeCode !== null && SERVER_FAILURE_CODES.includes(closeCode)) return `closed with ${closeCode}`;
  for (const message of messages) {
    const leak = leakedInternals(JSON.stringify(message) ?? '');
    if (leak) return `a message shows ${leak}`;
    const { type, payload } = (message ?? {}) as { type?: string; payload?: unknown };
    if (type === 'error') {
      const problem = graphqlErrorsProblem(payload);
      if (problem) return `error message: ${problem}`;
    }
    if (type === 'next' && (payload as { errors?: unknown } | undefined)?.errors) {
      const problem = graphqlErrorsProblem((payload as { errors: unknown }).errors);
      if (problem) return `next message: ${problem}`;
    }
  }
  return null;
}
