import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { PassThrough } from 'node:stream';
import { AtomicFiles } from '../../control-plane/storage/atomic-file';

/** An upload refused for its size leaves no temporary file, even when refused before its file finished opening. */
describe('AtomicFiles.receive over the limit', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'atomic-receive-'));
  afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('rejects with body_too_large and no file is left once it has rejected (first chunk over the limit and already waiting, 200 times)', async () => {
    const files = new AtomicFiles(dir);
    for (let attempt = 0; attempt < 200; attempt++) {
      // The bytes are already waiting: they flow on the next tick, while the file is still being opened.
      const source = new PassThrough();
      source.end(Buffer.alloc(64));
      await expect(files.receive(source, 16)).rejects.toMatchObject({ code: 'body_too_large' });
      expect(fs.readdirSync(dir)).toEqual([]);
    }
  });
});
