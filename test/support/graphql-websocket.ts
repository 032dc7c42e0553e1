import WebSocket from 'ws';

/** What the server sent for one operation over graphql-ws: every message payload, and the close if the socket was closed. */
export interface WebSocketOutcome {
  /** `next` payloads (execution results) and `error` payloads (arrays of GraphQL errors), in order. */
  messages: Array<{ type: 'next' | 'error'; payload: unknown }>;
  closed: { code: number; reason: string } | null;
}

/**
 * Runs one operation over the graphql-transport-ws protocol on a raw socket, so a test sees
 * exactly what the server sends (a client library would reshape errors and closes). Resolves
 * at `complete`, at `error`, at a close, or after `untilMs` (subscriptions that keep running).
 */
export async function overWebSocket(
  url: string, authorization: string, payload: { query: string; variables?: Record<string, unknown> },
  options: { untilMs?: number; onSubscribed?: () => Promise<void> | void } = {},
): Promise<WebSocketOutcome> {
  const socket = new WebSocket(`${url.replace(/^http/, 'ws')}/graphql`, 'graphql-transport-ws');
  const outcome: WebSocketOutcome = { messages: [], closed: null };
  return await new Promise<WebSocketOutcome>((resolve, reject) => {
    let timer: NodeJS.Timeout | undefined;
    const finish = () => {
      clearTimeout(timer);
      socket.removeAllListeners();
      socket.on('error', () => {});
      socket.terminate();
      resolve(outcome);
    };
    socket.on('error', reject);
    socket.on('open', () => socket.send(JSON.stringify({ type: 'connection_init', payload: { authorization } })));
    socket.on('close', (code, reason) => {
      outcome.closed = { code, reason: reason.toString() };
      finish();
    });
    socket.on('message', (data) => {
      const message = JSON.parse(data.toString()) as { type: string; payload?: unknown };
      if (message.type === 'connection_ack') {
        socket.send(JSON.stringify({ id: '1', type: 'subscribe', payload }));
        if (options.untilMs !== undefined) timer = setTimeout(finish, options.untilMs);
        void Promise.resolve(options.onSubscribed?.()).catch(reject);
      } else if (message.type === 'next' || message.type === 'error') {
        outcome.messages.push({ type: message.type, payload: message.payload });
        if (message.type === 'error') finish();
      } else if (message.type === 'complete') {
        finish();
      }
    });
  });
}
