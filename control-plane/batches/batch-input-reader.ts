import type { Batch, BatchFile } from './batch.entities';
import type { BatchFiles } from './batch-files';
import type { ClaimedLine } from './batch-store';

export interface BatchInputReaderOptions {
  /** One read of a file fetches this much from a line's start, so the lines after it come from memory. @default 1048576 */
  readAheadBytes: number;
  /** Read-ahead blocks kept at once, over all files (the oldest goes first): what the reader holds at most. @default 4 */
  maxBlocks: number;
}

export const DEFAULT_INPUT_READER_OPTIONS: BatchInputReaderOptions = { readAheadBytes: 1024 * 1024, maxBlocks: 4 };

interface Block {
  readonly fileId: string;
  readonly start: number;
  /** The bytes read from `start` (fewer than asked at the file's end); null when the object is gone. */
  readonly data: Promise<Buffer | null>;
}

/** Input files looked up: a batch's file row does not change while it runs (only its deletion waits for the batch). */
const MAX_FILES = 64;

/**
 * The bodies of batch lines, read where they lie in their batch's input file (the object store:
 * local files or S3) when the runner runs them: lines keep only an offset and a length in the
 * database. Lines are claimed in file order, so one read of `readAheadBytes` from a line's body
 * serves the lines after it too: ~10,000 small lines per read of S3. At most `maxBlocks` blocks
 * are held; a body longer than a block is read alone and not kept. Each body handed out is a
 * copy, so a running line never keeps a whole block alive.
 */
export class BatchInputReader {
  private readonly blocks: Block[] = [];
  private readonly fileRows = new Map<string, Promise<BatchFile | null>>();

  constructor(
    private readonly files: Pick<BatchFiles, 'inputOf' | 'readRange'>,
    private readonly options: BatchInputReaderOptions = DEFAULT_INPUT_READER_OPTIONS,
  ) {}

  /** The line's body, or null when its bytes are no longer in storage (its object was removed). */
  async body(batch: Batch, line: Pick<ClaimedLine, 'bodyOffset' | 'bodyLength' | 'body'>): Promise<Buffer | null> {
    if (line.body !== null) return Buffer.from(line.body);
    const file = await this.fileOf(batch);
    if (!file) return null;
    const { bodyOffset: offset, bodyLength: length } = line;
    if (length > this.options.readAheadBytes) {
      const data = await this.files.readRange(file, offset, length);
      return data && data.length === length ? data : null;
    }
    let block = this.blocks.find((held) => held.fileId === file.id && held.start <= offset && offset + length <= held.start + this.options.readAheadBytes);
    if (!block) block = this.read(file, offset);
    const data = await block.data.catch((error: unknown) => {
      this.forget(block!);
      throw error;
    });
    const from = offset - block.start;
    // Shorter than the line needs: the object changed or was cut short since the batch was validated.
    if (!data || from + length > data.length) return null;
    return Buffer.from(data.subarray(from, from + length));
  }

  private read(file: BatchFile, start: number): Block {
    const block: Block = { fileId: file.id, start, data: this.files.readRange(file, start, this.options.readAheadBytes) };
    this.blocks.push(block);
    if (this.blocks.length > this.options.maxBlocks) this.blocks.shift();
    return block;
  }

  private forget(block: Block): void {
    const at = this.blocks.indexOf(block);
    if (at >= 0) this.blocks.splice(at, 1);
  }

  private fileOf(batch: Batch): Promise<BatchFile | null> {
    let row = this.fileRows.get(batch.inputFileId);
    if (!row) {
      row = this.files.inputOf(batch);
      row.then((file) => {
        if (!file) this.fileRows.delete(batch.inputFileId);
      }, () => this.fileRows.delete(batch.inputFileId));
      this.fileRows.set(batch.inputFileId, row);
      if (this.fileRows.size > MAX_FILES) this.fileRows.delete(this.fileRows.keys().next().value!);
    }
    return row;
  }
}
