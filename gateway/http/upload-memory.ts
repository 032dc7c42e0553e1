import type { ServerResponse } from 'node:http';
import { AppError } from '../../control-plane/errors/app-error';

const MIB = 1024 * 1024;

/**
 * Memory for multipart bodies read whole (batch input files up to FILES_MAX_BYTES, image edits
 * and videos up to MAX_MEDIA_BODY_BYTES): each upload holds its declared length (its limit when
 * it declares none) from before its first byte is read until its response ends, however it ends.
 * Without a bound, parallel uploads of 100 MB each, from one tenant or several, held as much
 * memory as the server had. A workspace past its share gets 429, the server past its total 503,
 * both with Retry-After; nothing is read first. An upload larger than a bound on its own is still
 * taken when it would be the only one held there (so a limit above the budget works, one at a time).
 */
export class UploadMemory {
  private used = 0;
  private readonly byWorkspace = new Map<string, number>();

  constructor(private readonly options: { totalBytes: number; perWorkspaceBytes: number }) {}

  /** Bytes held now, over every workspace (tests, telemetry). */
  get heldBytes(): number {
    return this.used;
  }

  /** Holds `bytes` of `workspaceId`'s until `response` closes (multipart.ts, before reading a body); throws when they do not fit. */
  hold(response: ServerResponse, workspaceId: string, bytes: number): void {
    // Already closed (the client left before this ran): no 'close' is left to give it back, nor a body to read.
    if (response.closed) return;
    const mine = this.byWorkspace.get(workspaceId) ?? 0;
    if (mine > 0 && mine + bytes > this.options.perWorkspaceBytes) {
      throw new AppError('rate_limit_error', `this workspace already has ${size(mine)} of uploads being received by this server (at most ${size(this.options.perWorkspaceBytes)} at once); retry when one ends`, { retryAfterSeconds: 1 });
    }
    if (this.used > 0 && this.used + bytes > this.options.totalBytes) {
      throw new AppError('service_unavailable', `the server is receiving ${size(this.used)} of other uploads (at most ${size(this.options.totalBytes)} at once); retry shortly`, { retryAfterSeconds: 1 });
    }
    this.used += bytes;
    this.byWorkspace.set(workspaceId, mine + bytes);
    let released = false;
    response.once('close', () => {
      if (released) return;
      released = true;
      this.used -= bytes;
      const left = (this.byWorkspace.get(workspaceId) ?? 0) - bytes;
      if (left > 0) this.byWorkspace.set(workspaceId, left);
      else this.byWorkspace.delete(workspaceId);
    });
  }
}

function size(bytes: number): string {
  if (bytes >= MIB) return `${(bytes / MIB).toFixed(1)} MiB`;
  return bytes >= 1024 ? `${(bytes / 1024).toFixed(1)} KiB` : `${bytes} bytes`;
}
