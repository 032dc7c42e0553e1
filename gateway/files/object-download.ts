import type { Context } from 'koa';
import type { OpenedObject } from '../../control-plane/api/records';
import { ResponseFlow } from '../http/response-flow';

export interface ObjectDownloadOptions {
  /** A client that takes no byte for this long is cut (STREAM_STALL_TIMEOUT_MS). */
  stallTimeoutMs: number;
  /** Bytes waiting for the client beyond which it counts as stalled at once (never reached while the store's stream is paused as it should be). */
  maxBufferedBytes: number;
  /** Where the bytes downloads hold are counted. */
  tally: DownloadTally;
}

/** One download being sent. */
interface Download {
  heldBytes: number;
}

/**
 * The bytes downloads hold in the server: read from the object store and not yet taken by the
 * client's socket. Each is bounded by the stream's buffers (~100 KB), whatever the file's size
 * and however slowly the client reads. A tenant budget for download memory would hold and
 * release here (`start` and the download's end).
 */
export class DownloadTally {
  private readonly downloads = new Set<Download>();
  /** The most bytes one download has held at once since the server started. */
  maxHeldBytes = 0;

  get active(): number {
    return this.downloads.size;
  }

  /** What the downloads being sent hold now. */
  heldBytes(): number {
    let total = 0;
    for (const download of this.downloads) total += download.heldBytes;
    return total;
  }

  start(): Download {
    const download = { heldBytes: 0 };
    this.downloads.add(download);
    return download;
  }

  observe(download: Download, heldBytes: number): void {
    download.heldBytes = heldBytes;
    if (heldBytes > this.maxHeldBytes) this.maxHeldBytes = heldBytes;
  }

  end(download: Download): void {
    this.downloads.delete(download);
  }
}

/**
 * Sends an object as the response body, as the client reads it: the store's stream is paused
 * whenever the response's buffer is full and resumed when it drains, so a download holds a
 * chunk or two, never the file (a whole 100 MB file per download took 25 unread downloads to
 * 2.6 GB). A client that takes no byte for `stallTimeoutMs` is cut (ResponseFlow watches it),
 * and the stream is destroyed with the response, whichever way it ends. Resolves when the
 * response is over. The caller has set the headers (`context.set`).
 */
export async function sendObject(context: Context, opened: OpenedObject, options: ObjectDownloadOptions): Promise<void> {
  const response = context.res;
  const source = opened.stream;
  context.status = 200;
  context.length = opened.size;
  // Koa writes nothing more: the body goes out here, as the client takes it.
  context.respond = false;
  const download = options.tally.start();
  const observe = () => options.tally.observe(download, response.writableLength + source.readableLength);
  await new Promise<void>((resolve) => {
    const flow = new ResponseFlow(response, { stallTimeoutMs: options.stallTimeoutMs, maxBufferedBytes: options.maxBufferedBytes }, {
      consumed: () => {
        observe();
        if (source.isPaused() && !response.writableNeedDrain && !response.destroyed) source.resume();
      },
      // The client holds the socket and reads nothing: cut it (and the store's stream with it).
      stalled: () => response.destroy(),
    });
    source.on('data', (chunk: Buffer) => {
      flow.write(chunk);
      if (response.writableNeedDrain) source.pause();
      observe();
    });
    source.once('end', () => flow.end());
    // Headers are gone by now: a store failing mid-file can only cut the response short.
    source.once('error', () => response.destroy());
    response.once('close', () => {
      source.destroy();
      options.tally.end(download);
      resolve();
    });
  });
}
