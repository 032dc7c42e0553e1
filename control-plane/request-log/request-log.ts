import type { DataSource } from 'typeorm';
import { AppError } from '../errors/app-error';
import type { RequestLogBody, RequestLogEntry, RequestLogFilter, RequestLogPage, RequestLogStore } from './request-log-store';

/**
 * A workspace's request log as GraphQL serves it, and its one setting: whether bodies are
 * stored. Turning it on or off clears every server's key cache (the request path reads the
 * setting from the authenticated key), so it holds from the next request on, on every server.
 */
export class RequestLog {
  constructor(
    private readonly dataSource: DataSource,
    private readonly store: RequestLogStore,
    private readonly keysChanged: () => void,
  ) {}

  page(workspaceId: string, filter: RequestLogFilter, first: number, after: string | null): Promise<RequestLogPage> {
    return this.store.page(workspaceId, filter, first, after);
  }

  async entry(workspaceId: string, id: string): Promise<RequestLogEntry> {
    const entry = await this.store.entry(workspaceId, id);
    if (!entry) throw new AppError('not_found', `no request '${id.slice(0, 128)}' in this workspace's request log`, { param: 'id' });
    return entry;
  }

  body(workspaceId: string, id: string): Promise<RequestLogBody | null> {
    return this.store.body(workspaceId, id);
  }

  async storesBodies(workspaceId: string): Promise<boolean> {
    const rows: Array<{ store_request_bodies: boolean }> = await this.dataSource.query('SELECT store_request_bodies FROM workspaces WHERE id = $1', [workspaceId]);
    return rows[0]?.store_request_bodies ?? false;
  }

  /** Turns storing of request and answer bodies on or off for the workspace's requests from now on; bodies stored before stay until retention. */
  async setStoresBodies(workspaceId: string, store: boolean): Promise<boolean> {
    await this.dataSource.query('UPDATE workspaces SET store_request_bodies = $2 WHERE id = $1', [workspaceId, store]);
    this.keysChanged();
    return store;
  }
}
