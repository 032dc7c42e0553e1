import { jsonShapeProblem, type JsonShapeProblem } from '../../common/json-nesting';
import type { WorkSlices } from './work-slices';

/** One line of a JSONL file, where it lies in the file. */
export interface JsonlLine {
  /** 0-based line number (blank lines count). */
  readonly index: number;
  /** Byte offset of its first byte in the file. */
  readonly offset: number;
  /** Its bytes, without the `\n` and a `\r` before it. */
  readonly length: number;
  /** The bytes; null for a line longer than the splitter's limit, which is counted but never held. */
  readonly raw: Buffer | null;
}

const NEWLINE = 0x0a;
const CARRIAGE_RETURN = 0x0d;

/**
 * A JSONL file split into lines as its chunks arrive (an object store's stream), holding at
 * most one line of `maxLineBytes` (plus the chunk being read): a line longer than that is
 * measured and skipped, not gathered, so a 100 MB file of one line costs no 100 MB buffer.
 */
export class JsonlSplitter {
  private index = 0;
  /** File offset of the line being gathered. */
  private lineStart = 0;
  /** Bytes of the line being gathered, while it is within the limit. */
  private parts: Buffer[] = [];
  private partsLength = 0;
  /** Bytes seen of the line being gathered (also once it is past the limit and no longer kept). */
  private seen = 0;
  /** The last of them (a `\r` ending a line too long to keep is still not part of it). */
  private lastSeen: number | undefined;

  constructor(private readonly maxLineBytes: number) {}

  /** The lines that end in `chunk`. */
  *push(chunk: Buffer): Generator<JsonlLine> {
    let start = 0;
    for (;;) {
      const newline = chunk.indexOf(NEWLINE, start);
      if (newline === -1) {
        this.gather(chunk.subarray(start));
        return;
      }
      yield this.finish(chunk.subarray(start, newline), 1);
      start = newline + 1;
    }
  }

  /** The last line, when the file does not end with a newline. */
  *end(): Generator<JsonlLine> {
    if (this.seen > 0) yield this.finish(Buffer.alloc(0), 0);
  }

  private gather(piece: Buffer): void {
    this.seen += piece.length;
    if (piece.length > 0) this.lastSeen = piece[piece.length - 1];
    // One byte over the limit may still be the `\r` of a line exactly at the limit.
    if (this.seen > this.maxLineBytes + 1) {
      this.parts = [];
      this.partsLength = 0;
    } else if (piece.length > 0) {
      // Copied: the chunk it came from is not kept for the sake of one line.
      this.parts.push(Buffer.from(piece));
      this.partsLength += piece.length;
    }
  }

  private finish(tail: Buffer, newlineBytes: number): JsonlLine {
    const total = this.seen + tail.length;
    let raw: Buffer | null = null;
    if (total <= this.maxLineBytes + 1) raw = this.parts.length === 0 ? tail : Buffer.concat([...this.parts, tail], this.partsLength + tail.length);
    let length = total;
    if (length > 0 && (tail.length > 0 ? tail[tail.length - 1] : this.lastSeen) === CARRIAGE_RETURN) {
      length--;
      raw = raw?.subarray(0, length) ?? null;
    }
    if (length > this.maxLineBytes) raw = null;
    const line: JsonlLine = { index: this.index++, offset: this.lineStart, length, raw };
    this.lineStart += total + newlineBytes;
    this.parts = [];
    this.partsLength = 0;
    this.seen = 0;
    this.lastSeen = undefined;
    return line;
  }
}

/**
 * The first line of `data` (its number, from 1, and why) that nests arrays and objects deeper
 * than MAX_JSON_DEPTH or holds more than MAX_JSON_CONTAINERS of them, or null. Run on an upload
 * before it is stored, in slices: a line is refused at its 129th bracket (or its 50,001st
 * container) without being parsed, so a file of such lines costs a scan, not the seconds
 * JSON.parse took building them.
 */
export async function firstDeepLine(data: Buffer, slices: WorkSlices): Promise<{ line: number; problem: JsonShapeProblem } | null> {
  for (let start = 0, number = 1; start < data.length; number++) {
    let end = data.indexOf(NEWLINE, start);
    if (end === -1) end = data.length;
    const problem = jsonShapeProblem(data.subarray(start, end));
    if (problem) return { line: number, problem };
    start = end + 1;
    await slices.pause();
  }
  return null;
}
