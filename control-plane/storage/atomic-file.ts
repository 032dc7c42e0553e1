import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { AppError } from '../errors/app-error';

const FOLDER_CONFLICTS = new Set(['EEXIST', 'ENOTDIR', 'EISDIR', 'ENOTEMPTY']);

/**
 * Files appear whole or not at all: bytes go to a temporary file in `tmpDir` (same file system
 * as the target, so the rename is atomic) and are renamed into place. A reader never sees half
 * an image, and a crash leaves only a stray temporary file.
 */
export class AtomicFiles {
  constructor(private readonly tmpDir: string) {}

  async write(target: string, data: Buffer | string): Promise<void> {
    await this.commit(await this.stage(data), target);
  }

  /** Writes `data` to a temporary file and returns its path; `commit` renames it into place. */
  async stage(data: Buffer | string | readonly Buffer[]): Promise<string> {
    const temporary = await this.temporaryPath();
    try {
      await fs.promises.writeFile(temporary, data, { flag: 'wx' });
      return temporary;
    } catch (error) {
      await fs.promises.rm(temporary, { force: true });
      throw error;
    }
  }

  /**
   * Streams `source` to a temporary file, failing with `body_too_large` past `maxBytes`.
   * Returns the temporary path; `commit` renames it into place. On failure the source is
   * drained, not destroyed: an HTTP request must stay readable so the 413 reaches the client.
   */
  async receive(source: Readable, maxBytes: number): Promise<{ temporary: string; size: number }> {
    const temporary = await this.temporaryPath();
    try {
      const size = await copyLimited(source, fs.createWriteStream(temporary, { flags: 'wx' }), maxBytes);
      return { temporary, size };
    } catch (error) {
      await fs.promises.rm(temporary, { force: true });
      throw error;
    }
  }

  async commit(temporary: string, target: string): Promise<void> {
    try {
      await this.moveInto(temporary, target);
    } catch (error) {
      await fs.promises.rm(temporary, { force: true });
      throw error;
    }
  }

  async discard(temporary: string): Promise<void> {
    await fs.promises.rm(temporary, { force: true });
  }

  private async temporaryPath(): Promise<string> {
    await fs.promises.mkdir(this.tmpDir, { recursive: true });
    return path.join(this.tmpDir, `${Date.now()}-${randomBytes(8).toString('hex')}.tmp`);
  }

  private async moveInto(temporary: string, target: string): Promise<void> {
    try {
      await fs.promises.mkdir(path.dirname(target), { recursive: true });
      await fs.promises.rename(temporary, target);
    } catch (error) {
      // S3 allows both `a` and `a/b`; a file system cannot hold a file and a folder at one path.
      if (!FOLDER_CONFLICTS.has((error as NodeJS.ErrnoException).code ?? '')) throw error;
      throw new AppError('invalid_request', 'the key conflicts with an existing one: in the local store a key cannot be both an object and a folder of objects', { param: 'key', cause: error });
    }
  }
}

function copyLimited(source: Readable, target: fs.WriteStream, maxBytes: number): Promise<number> {
  return new Promise((resolve, reject) => {
    let size = 0;
    let settled = false;
    let ended = false;
    const fail = (error: unknown) => {
      if (settled) return;
      settled = true;
      source.off('data', count);
      source.unpipe(target);
      source.resume();
      // Rejected once the file is closed: a stream destroyed while its file is still opening
      // creates the file afterwards, and the caller's rm of it would otherwise run first and
      // leave a stray temporary file behind.
      target.destroy();
      if (target.closed) reject(error);
      else target.once('close', () => reject(error));
    };
    // Registered before pipe(), so an over-limit chunk is refused before it is written.
    const count = (chunk: Buffer) => {
      size += chunk.length;
      if (size > maxBytes) fail(new AppError('body_too_large', `upload is larger than the limit of ${maxBytes} bytes`));
    };
    source.on('data', count);
    source.once('end', () => { ended = true; });
    source.on('error', fail);
    source.once('close', () => { if (!ended) fail(new Error('the upload ended before all bytes arrived')); });
    target.on('error', fail);
    target.once('finish', () => {
      if (settled) return;
      settled = true;
      resolve(size);
    });
    source.pipe(target);
  });
}
