import type { Logger } from 'pino';
import type { WebSocket } from 'ws';
import { CloseCode } from 'graphql-ws';
import type { ApiKeyService, BudgetHolder, BudgetLease } from '../../control-plane/api/inference';
import { hashSecret } from '../../control-plane/api/startup';
import { bearerToken } from '../http/bearer-token';
import type { GraphQLContext } from './graphql-context';

interface Session {
  readonly socket: WebSocket;
  readonly authorization: string | undefined;
  /** SHA-256 of the key the socket signed in with; null for the operator token (it cannot be revoked). */
  readonly keyHash: string | null;
  /** Its hold on the `sockets` budget, from the accepted `connection_init` until it closes. */
  readonly lease: BudgetLease;
  /** Who its operations are counted for (the key it signed in with; nobody's for the operator token). */
  readonly holder: BudgetHolder;
}

/** RFC 6455: the server cannot check the key now (its database is away); the client may reconnect later. */
const TRY_AGAIN_LATER = 1013;

export interface SocketSessionsOptions {
  /** A socket that does not answer the close handshake is cut this long after it was told to close. @default 1000 */
  closeGraceMs?: number;
}

/**
 * The graphql-ws connections of this server and the key each signed in with. A WebSocket is
 * authenticated once when it opens, but its key can be revoked or regenerated, or its workspace
 * deleted, while it stays open: then its operations must stop at once, as HTTP calls with the
 * key do. So every operation is authorized with the key's current state (the key cache HTTP
 * uses), and when a key's cached state is invalidated on any server (the cache's cluster
 * notification) its sockets are re-checked and closed with 4403 if it no longer holds, which
 * ends their subscriptions.
 */
export class SocketSessions {
  private readonly sessions = new Map<WebSocket, Session>();
  private readonly stopListening: () => void;
  private readonly closeGraceMs: number;

  constructor(
    private readonly authorize: (authorization: string | undefined) => Promise<GraphQLContext>,
    apiKeys: Pick<ApiKeyService, 'onInvalidated'>,
    private readonly logger: Logger,
    options: SocketSessionsOptions = {},
  ) {
    this.closeGraceMs = options.closeGraceMs ?? 1_000;
    this.stopListening = apiKeys.onInvalidated((hash) => this.invalidated(hash));
  }

  get size(): number {
    return this.sessions.size;
  }

  /**
   * A socket whose connection was accepted with `caller`, holding `lease`; forgotten, and the
   * lease given back, when it closes (it must still be open: a closed socket emits no `close`).
   */
  add(socket: WebSocket, authorization: string | undefined, caller: GraphQLContext, lease: BudgetLease): void {
    const token = caller.key ? bearerToken(authorization) : null;
    const holder = { keyId: caller.key?.id ?? null, workspaceId: caller.key?.workspaceId ?? null };
    this.sessions.set(socket, { socket, authorization, keyHash: token ? hashSecret(token) : null, lease, holder });
    socket.once('close', () => {
      this.sessions.delete(socket);
      lease.release();
    });
  }

  /** Who `socket`'s operations are counted for, known without waiting (the key it signed in with). */
  holderOf(socket: WebSocket): BudgetHolder {
    return this.sessions.get(socket)?.holder ?? {};
  }

  /**
   * The caller of `socket` as of now; null (and the socket closed with 4403) when its key no
   * longer authenticates. A lookup that fails (database away) closes it with 1013.
   */
  async current(socket: WebSocket): Promise<GraphQLContext | null> {
    const session = this.sessions.get(socket);
    if (!session) return null;
    let caller: GraphQLContext;
    try {
      caller = await this.authorize(session.authorization);
    } catch (error) {
      this.logger.warn({ err: error }, 'could not re-check a WebSocket key; closing the connection');
      this.close(session, TRY_AGAIN_LATER, 'Try again later: the key could not be checked');
      return null;
    }
    if (caller.key || caller.operator) return caller;
    this.close(session, CloseCode.Forbidden, 'Forbidden: the API key was revoked or replaced');
    return null;
  }

  /** Stops following keys and gives back every socket's hold (the server stops; its sockets are being closed). */
  stop(): void {
    this.stopListening();
    for (const session of this.sessions.values()) session.lease.release();
    this.sessions.clear();
  }

  private invalidated(hash: string): void {
    for (const session of this.sessions.values()) {
      if (session.keyHash === null || (hash !== '*' && hash !== session.keyHash)) continue;
      void this.current(session.socket);
    }
  }

  private close(session: Session, code: number, reason: string): void {
    // Deleted now so that it is closed once; its hold lasts until the socket has closed.
    this.sessions.delete(session.socket);
    session.socket.close(code, reason);
    // Nothing more is sent once it is closing; a client that never answers the close handshake
    // would otherwise hold its subscriptions for ws's 30 s close timeout.
    setTimeout(() => session.socket.terminate(), this.closeGraceMs).unref();
  }
}
