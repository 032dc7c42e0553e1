import type { IncomingMessage } from 'node:http';
import { CloseCode, handleProtocols, type Server } from 'graphql-ws';
import type { Logger } from 'pino';
import type { WebSocket, WebSocketServer } from 'ws';
import { JsonNestingError, MAX_JSON_DEPTH, parseJsonText } from '../../common/json-nesting';

export interface WebSocketLimits {
  /** Largest message before `connection_init` was accepted (a key in `connectionParams` fits many times over). */
  preInitMaxBytes: number;
  /** Ping interval; a client that does not answer with a pong within it is dropped. 0 disables. */
  keepAliveMs: number;
}

/** What every graphql-ws hook sees as `context.extra`. */
export interface SocketExtra {
  readonly socket: WebSocket;
  readonly request: IncomingMessage;
  /** Set by onConnect once the connection was accepted. */
  acknowledged: boolean;
}

/** Messages only a server sends; graphql-ws answers one from a client by closing with 4500 (its "internal error"). */
const SERVER_MESSAGE_TYPES = new Set(['connection_ack', 'next', 'error']);

/** RFC 6455 close code for a message larger than the receiver takes. */
export const MESSAGE_TOO_BIG = 1009;

/**
 * graphql-ws over `ws`, in place of graphql-ws's own `useServer`, so that every message is
 * measured before graphql-ws parses it: its adapter JSON.parses whatever arrives, and a 16 MB
 * frame of nested arrays sent before `connection_init` stalled the server for 15.7 s and took
 * its memory to 1.2 GB. Here the server's `maxPayload` bounds every frame (ws refuses larger
 * ones with 1009 while reading), a frame before the connection is accepted is refused beyond
 * `preInitMaxBytes`, and over-deep JSON is refused by a scan before any object is built.
 */
export function serveOverWebSocket(websockets: WebSocketServer, server: Server<SocketExtra>, limits: WebSocketLimits, logger: Logger) {
  websockets.options.handleProtocols = handleProtocols;
  websockets.on('error', (error) => logger.error({ err: error }, 'WebSocket server error'));
  websockets.on('connection', (socket, request) => {
    const extra: SocketExtra = { socket, request, acknowledged: false };
    socket.once('error', (error) => {
      logger.warn({ err: error }, 'WebSocket connection error');
      socket.close(CloseCode.InternalServerError, 'Internal server error');
    });
    const keepAlive = keepAliveTimer(socket, limits.keepAliveMs);
    const closed = server.opened({
      protocol: socket.protocol,
      send: (data) => new Promise<void>((resolve, reject) => {
        if (socket.readyState !== socket.OPEN) return resolve();
        socket.send(data, (error) => (error ? reject(error) : resolve()));
      }),
      close: (code, reason) => socket.close(code, reason),
      onMessage: (handle) => socket.on('message', (data: Buffer, isBinary: boolean) => {
        // Frames that arrived before the socket was told to close are not read: a client closed
        // for what it sent has nothing more served, and what it queued costs no parse.
        if (socket.readyState !== socket.OPEN) return;
        const refusal = refusalOf(data, isBinary, extra.acknowledged, limits.preInitMaxBytes);
        if (refusal) {
          socket.close(refusal.code, refusal.reason);
          return;
        }
        handle(data.toString('utf8')).catch((error: unknown) => {
          logger.error({ err: error }, 'graphql-ws message handling failed');
          socket.close(CloseCode.InternalServerError, 'Internal server error');
        });
      }),
    }, extra);
    socket.once('close', (code, reason) => {
      keepAlive.stop();
      closed(code, reason.toString()).catch((error: unknown) => logger.error({ err: error }, 'graphql-ws close handling failed'));
    });
  });

  return {
    /** Closes every connection (1001 going away) and the server. */
    async dispose(): Promise<void> {
      for (const client of websockets.clients) client.close(1001, 'Going away');
      websockets.removeAllListeners();
      await new Promise<void>((resolve, reject) => websockets.close((error) => (error ? reject(error) : resolve())));
    },
  };
}

/** Why a message is refused before graphql-ws reads it, or null. */
function refusalOf(data: Buffer, isBinary: boolean, acknowledged: boolean, preInitMaxBytes: number): { code: number; reason: string } | null {
  if (isBinary) return { code: CloseCode.BadRequest, reason: 'messages are JSON text frames' };
  if (!acknowledged && data.length > preInitMaxBytes) {
    return { code: MESSAGE_TOO_BIG, reason: `at most ${preInitMaxBytes} bytes before the connection is accepted` };
  }
  let type: string | null;
  try {
    type = messageType(data);
  } catch (error) {
    if (error instanceof JsonNestingError) return { code: CloseCode.BadRequest, reason: error.problem === 'depth' ? `message nests more than ${MAX_JSON_DEPTH} levels deep` : error.message };
    return null; // graphql-ws refuses it (4400 Invalid message received)
  }
  // A client that sends a server's message breaks the protocol: 4400 Bad Request, the code
  // graphql-ws gives other malformed messages.
  if (type !== null && SERVER_MESSAGE_TYPES.has(type)) return { code: CloseCode.BadRequest, reason: `Unexpected message of type ${type} received` };
  return null;
}

/** The message's `type`; throws what the parse (or the nesting scan before it) refuses. */
function messageType(data: Buffer): string | null {
  const type = (parseJsonText(data) as { type?: unknown } | null)?.type;
  return typeof type === 'string' ? type : null;
}

/** Pings every `intervalMs`; a socket that has not answered the previous ping by the next one is dropped. */
function keepAliveTimer(socket: WebSocket, intervalMs: number): { stop(): void } {
  if (!(intervalMs > 0) || !Number.isFinite(intervalMs)) return { stop: () => {} };
  let answered = true;
  socket.on('pong', () => (answered = true));
  const timer = setInterval(() => {
    if (socket.readyState !== socket.OPEN) return;
    if (!answered) {
      socket.terminate();
      return;
    }
    answered = false;
    socket.ping();
  }, intervalMs);
  return { stop: () => clearInterval(timer) };
}
