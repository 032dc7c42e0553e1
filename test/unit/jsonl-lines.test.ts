import { firstDeepLine, JsonlSplitter, type JsonlLine } from '../../control-plane/batches/jsonl-lines';
import { WorkSlices } from '../../control-plane/batches/work-slices';

function split(data: Buffer, maxLineBytes: number, chunkSize: number): JsonlLine[] {
  const splitter = new JsonlSplitter(maxLineBytes);
  const lines: JsonlLine[] = [];
  for (let start = 0; start < data.length; start += chunkSize) lines.push(...splitter.push(data.subarray(start, start + chunkSize)));
  lines.push(...splitter.end());
  return lines;
}

describe('JsonlSplitter', () => {
  it('gives each line with its offset in the file, whatever the chunks, CRLF and a missing last newline included', () => {
    const data = Buffer.from('ab\r\n\ncdé\nlast');
    for (const size of [1, 2, 3, 100]) {
      const lines = split(data, 100, size);
      expect(lines.map((line) => [line.index, line.offset, line.length, line.raw?.toString()])).toEqual([
        [0, 0, 2, 'ab'], [1, 4, 0, ''], [2, 5, 4, 'cdé'], [3, 10, 4, 'last'],
      ]);
      for (const line of lines) expect(data.subarray(line.offset, line.offset + line.length).equals(line.raw!)).toBe(true);
    }
  });

  it('measures a line longer than the limit without keeping it, and keeps counting offsets after it', () => {
    const data = Buffer.from(`${'x'.repeat(1_000)}\nok\n${'y'.repeat(11)}\r\n`);
    for (const size of [1, 7, 4096]) {
      const lines = split(data, 10, size);
      expect(lines.map((line) => [line.offset, line.length, line.raw?.toString() ?? null])).toEqual([
        [0, 1_000, null], [1_001, 2, 'ok'], [1_004, 11, null],
      ]);
    }
    // A line exactly at the limit, its `\r` beyond it, is kept.
    expect(split(Buffer.from(`${'z'.repeat(10)}\r\n`), 10, 3)[0].raw?.toString()).toBe('z'.repeat(10));
  });
});

describe('firstDeepLine', () => {
  it('names the first line nesting past 128 levels (brackets in strings do not count), or none', async () => {
    const deep = '['.repeat(129) + ']'.repeat(129);
    const shallow = '['.repeat(128) + ']'.repeat(128);
    expect(await firstDeepLine(Buffer.from(`{"a":1}\n${shallow}\n"${deep}"\n${deep}\n${deep}`), new WorkSlices())).toEqual({ line: 4, problem: 'depth' });
    expect(await firstDeepLine(Buffer.from(`${shallow}\n${shallow}`), new WorkSlices())).toBeNull();
  });

  it('names the first line holding more than 50,000 arrays and objects, however shallow', async () => {
    const stuffed = `{"a":[${Array.from({ length: 50_000 }, () => '[]').join(',')}]}`;
    const full = `{"a":[${Array.from({ length: 49_998 }, () => '[]').join(',')}]}`;
    expect(await firstDeepLine(Buffer.from(`${full}\n${stuffed}`), new WorkSlices())).toEqual({ line: 2, problem: 'containers' });
    expect(await firstDeepLine(Buffer.from(full), new WorkSlices())).toBeNull();
  });
});
