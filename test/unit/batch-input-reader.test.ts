import { BatchInputReader } from '../../control-plane/batches/batch-input-reader';
import type { Batch, BatchFile } from '../../control-plane/batches/batch.entities';

/** Files as the object store has them; counts the reads the reader makes. */
function storage(objects: Record<string, Buffer>) {
  const reads: Array<{ offset: number; length: number }> = [];
  return {
    reads,
    files: {
      inputOf: async (batch: Pick<Batch, 'inputFileId'>) => (objects[batch.inputFileId] ? { id: batch.inputFileId } as BatchFile : null),
      readRange: async (file: BatchFile, offset: number, length: number) => {
        reads.push({ offset, length });
        const data = objects[file.id];
        return data ? data.subarray(offset, offset + length) : null;
      },
    },
  };
}

const batchOf = (inputFileId: string) => ({ inputFileId, workspaceId: 'ws', deploymentId: 'd' }) as Batch;

describe('BatchInputReader', () => {
  const lines = Array.from({ length: 100 }, (_, index) => `{"n":${index},"pad":"${'p'.repeat(90)}"}`);
  const file = Buffer.from(lines.join('\n'));
  const spans = lines.map((line, index) => ({ bodyOffset: lines.slice(0, index).reduce((sum, earlier) => sum + earlier.length + 1, 0), bodyLength: line.length, body: null }));

  it('serves the lines after a read from its read-ahead block: one read per block, each body its own copy', async () => {
    const { files, reads } = storage({ 'file-a': file });
    const reader = new BatchInputReader(files, { readAheadBytes: 4_096, maxBlocks: 2 });
    const bodies = await Promise.all(spans.map((span) => reader.body(batchOf('file-a'), span)));
    expect(bodies.map((body) => body?.toString())).toEqual(lines);
    // ~10 KB of lines in 4 KB blocks (each starting at a line): a handful of reads, not 100.
    expect(reads.length).toBeLessThanOrEqual(Math.ceil(file.length / (4_096 - 200)) + 1);
  });

  it('hands out copies: a running line keeps its body, not the block it came from', async () => {
    // A 200 KB file, one block of it: a body that were a view of the block would keep those 200 KB alive.
    const { files, reads } = storage({ 'file-big': Buffer.concat([file, Buffer.alloc(200_000, 0x20)]) });
    const reader = new BatchInputReader(files, { readAheadBytes: 512 * 1024, maxBlocks: 1 });
    const body = await reader.body(batchOf('file-big'), spans[3]);
    expect(reads).toHaveLength(1);
    expect(body?.toString()).toBe(lines[3]);
    expect(body!.buffer.byteLength).toBeLessThan(100_000);
  });

  it('reads a body larger than a block alone, gives a line stored with its body that body, and null once the object is gone or cut short', async () => {
    const { files, reads } = storage({ 'file-a': file, 'file-short': file.subarray(0, 500) });
    const reader = new BatchInputReader(files, { readAheadBytes: 64, maxBlocks: 2 });
    expect((await reader.body(batchOf('file-a'), spans[5]))?.toString()).toBe(lines[5]);
    expect(reads).toEqual([{ offset: spans[5].bodyOffset, length: spans[5].bodyLength }]);
    expect((await reader.body(batchOf('file-a'), { bodyOffset: 0, bodyLength: 0, body: '{"kept":true}' }))?.toString()).toBe('{"kept":true}');
    expect(await reader.body(batchOf('file-gone'), spans[0])).toBeNull();
    expect(await reader.body(batchOf('file-short'), spans[10])).toBeNull();
  });
});
