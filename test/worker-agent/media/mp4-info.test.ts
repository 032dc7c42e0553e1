import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import sharp from 'sharp';
import { Mp4FormatError, readMp4Info, readMp4Samples, renderVideo } from '../../../worker-agent/media';
import { isInstalled } from './support/external-tools';

describe('readMp4Info', () => {
  test('rejects bytes that are not an MP4 with a video track', () => {
    expect(() => readMp4Info(Buffer.from('plain text, no boxes here'))).toThrow(Mp4FormatError);
    expect(() => readMp4Info(Buffer.alloc(0))).toThrow(/no moov box/);
  });

  test('rejects a file cut short instead of reading past it', async () => {
    const video = await renderVideo({ width: 32, height: 32, fps: 8, frames: 4, prompt: 'short', seed: 1 });
    // The moov box comes first, so cutting inside it breaks the box sizes.
    expect(() => readMp4Info(video.subarray(0, 200))).toThrow(Mp4FormatError);
    // Cutting the media data leaves the tables intact but the frames out of reach.
    expect(readMp4Info(video.subarray(0, video.length - 10)).frames).toBe(4);
    expect(() => readMp4Samples(video.subarray(0, video.length - 10))).toThrow(/lies outside the file|invalid size/);
  });

  // A file from another writer shows the reader follows the format, not just our own layout.
  (isInstalled('ffmpeg') ? test : test.skip)('reads an MP4 that ffmpeg wrote', async () => {
    const directory = fs.mkdtempSync(path.join(os.tmpdir(), 'mp4-info-'));
    try {
      const file = path.join(directory, 'ffmpeg.mp4');
      const result = spawnSync('ffmpeg', [
        '-v', 'error', '-f', 'lavfi', '-i', 'testsrc=size=64x48:rate=25:duration=1.2', '-c:v', 'mjpeg', '-y', file,
      ], { encoding: 'utf8' });
      expect(result.stderr).toBe('');
      const bytes = fs.readFileSync(file);
      expect(readMp4Info(bytes)).toMatchObject({ width: 64, height: 48, frames: 30, fps: 25, durationSeconds: 1.2, codec: 'mp4v', objectTypeIndication: 0x6c });
      const frames = readMp4Samples(bytes);
      expect(frames).toHaveLength(30);
      expect(await sharp(frames[29]).metadata()).toMatchObject({ format: 'jpeg', width: 64, height: 48 });
    } finally {
      fs.rmSync(directory, { recursive: true, force: true });
    }
  });
});
