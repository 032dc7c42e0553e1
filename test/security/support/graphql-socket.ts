import WebSocket from 'ws';

export interface SocketClose {
  code: number;
  reason: string;
  /** Date.now() when the close arrived. */
  at: number;
}

interface Operation {
  /** The graphql-ws operation id. */
  id: string;
  results: unknown[];
  ended: boolean;
  onMessage?: () => void;
}

/**
 * One raw graphql-transport-ws connection that stays open across operations, so a test can
 * change the key it signed in with and see what the same socket does next (a client library
 * would reconnect or reshape what the server sent).
 */
export class GraphQLSocket {
  readonly closed: Promise<SocketClose>;
  close: SocketClose | null = null;
  private readonly operations = new Map<string, Operation>();
  private nextId = 1;

  private constructor(private readonly socket: WebSocket) {
    this.closed = new Promise((resolve) => {
      socket.on('close', (code, reason) => {
        this.close = { code, reason: reason.toString(), at: Date.now() };
        for (const operation of this.operations.values()) operation.onMessage?.();
        resolve(this.close);
      });
    });
    socket.on('message', (data) => {
      const message = JSON.parse(data.toString()) as { id?: string; type: string; payload?: unknown };
      const operation = message.id ? this.operations.get(message.id) : undefined;
      if (!operation) return;
      if (message.type === 'next' || message.type === 'error') operation.results.push(message.payload);
      if (message.type === 'complete' || message.type === 'error') operation.ended = true;
      operation.onMessage?.();
    });
  }

  /** Opens a socket and waits for `connection_ack`; rejects with the close when refused. */
  static async open(serverUrl: string, authorization: string): Promise<GraphQLSocket> {
    const socket = new WebSocket(`${serverUrl.replace(/^http/, 'ws')}/graphql`, 'graphql-transport-ws');
    socket.on('error', () => {});
    const client = new GraphQLSocket(socket);
    await new Promise<void>((resolve, reject) => {
      socket.once('open', () => socket.send(JSON.stringify({ type: 'connection_init', payload: { authorization } })));
      socket.on('message', (data) => {
        if ((JSON.parse(data.toString()) as { type: string }).type === 'connection_ack') resolve();
      });
      void client.closed.then((close) => reject(new Error(`closed ${close.code} ${close.reason} before connection_ack`)));
    });
    return client;
  }

  /** Starts an operation; its results collect in the returned list. */
  start(query: string, variables?: Record<string, unknown>): Operation {
    const id = String(this.nextId++);
    const operation: Operation = { id, results: [], ended: false };
    this.operations.set(id, operation);
    if (this.socket.readyState === WebSocket.OPEN) this.socket.send(JSON.stringify({ id, type: 'subscribe', payload: { query, variables } }));
    return operation;
  }

  /** Runs a query or mutation: its first result, or null when the socket closed first. */
  async run(query: string, variables?: Record<string, unknown>): Promise<{ data?: Record<string, unknown> | null; errors?: Array<{ extensions?: { code?: string } }> } | Array<{ extensions?: { code?: string } }> | null> {
    const operation = this.start(query, variables);
    await new Promise<void>((resolve) => {
      const check = () => {
        if (operation.results.length > 0 || this.close) resolve();
      };
      operation.onMessage = check;
      check();
    });
    return (operation.results[0] as never) ?? null;
  }

  /** Ends a subscription from the client's side (graphql-ws `complete`). */
  complete(operation: Operation): void {
    if (this.socket.readyState === WebSocket.OPEN) this.socket.send(JSON.stringify({ id: operation.id, type: 'complete' }));
  }

  /** Closes the connection with the close handshake (1000). */
  async end(): Promise<void> {
    this.socket.close(1000);
    await this.closed;
  }

  terminate(): void {
    this.socket.removeAllListeners('message');
    this.socket.terminate();
  }
}
