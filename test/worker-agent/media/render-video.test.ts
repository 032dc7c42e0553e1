import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { execFileSync, spawnSync } from 'node:child_process';
import { MediaInputError, readMp4Info, readMp4Samples, renderVideo, type RenderVideoOptions } from '../../../worker-agent/media';
import { isInstalled } from './support/external-tools';
import { decodeRgb, encodeTestPicture, lumaCorrelation, meanAbsoluteDifference } from './support/pixels';

const small: RenderVideoOptions = { width: 96, height: 64, fps: 12, frames: 10, prompt: 'waves at night', seed: 7 };

describe('renderVideo', () => {
  test('writes an MP4 with exactly the requested frames, rate and size', async () => {
    const video = await renderVideo(small);
    expect(video.toString('latin1', 4, 8)).toBe('ftyp');
    expect(readMp4Info(video)).toEqual({
      width: 96, height: 64, frames: 10, fps: 12, durationSeconds: 10 / 12, codec: 'mp4v', objectTypeIndication: 0x6c,
    });
  });

  test('keeps a fractional rate such as 29.97', async () => {
    const info = readMp4Info(await renderVideo({ ...small, fps: 29.97, frames: 3 }));
    expect(info.fps).toBeCloseTo(29.97, 10);
    expect(info.frames).toBe(3);
  });

  test('stores one decodable JPEG per frame, and the frames animate', async () => {
    const frames = readMp4Samples(await renderVideo(small));
    expect(frames).toHaveLength(10);
    const decoded = await Promise.all(frames.map((frame) => decodeRgb(frame)));
    for (const frame of decoded) expect(frame).toMatchObject({ width: 96, height: 64 });
    expect(meanAbsoluteDifference(decoded[0].data, decoded[1].data)).toBeGreaterThan(0.5);
    expect(meanAbsoluteDifference(decoded[0].data, decoded[9].data)).toBeGreaterThan(5);
  });

  test('is byte-identical for equal options and differs for another seed', async () => {
    const first = await renderVideo(small);
    expect(first.equals(await renderVideo({ ...small }))).toBe(true);
    expect(first.equals(await renderVideo({ ...small, seed: 8 }))).toBe(false);
    const { seed: _, ...unseeded } = small;
    expect((await renderVideo(unseeded)).equals(await renderVideo(unseeded))).toBe(true);
  });

  test('starts from the input reference and evolves away from it', async () => {
    const inputReference = await encodeTestPicture('png', 192, 128, 0);
    const unrelated = await decodeRgb(await encodeTestPicture('png', 192, 128, 1), { width: 96, height: 64 });
    const reference = await decodeRgb(inputReference, { width: 96, height: 64 });
    const frames = await Promise.all(readMp4Samples(await renderVideo({ ...small, inputReference })).map((frame) => decodeRgb(frame)));
    const first = frames[0].data;
    expect(meanAbsoluteDifference(first, reference.data)).toBeLessThan(meanAbsoluteDifference(first, unrelated.data));
    expect(lumaCorrelation(first, reference.data)).toBeGreaterThan(0.9);
    expect(meanAbsoluteDifference(frames[9].data, reference.data)).toBeGreaterThan(meanAbsoluteDifference(first, reference.data));
  });

  test('rejects an undecodable input reference naming input_reference', async () => {
    const failure = renderVideo({ ...small, inputReference: Buffer.from('not an image') });
    await expect(failure).rejects.toBeInstanceOf(MediaInputError);
    await expect(failure).rejects.toMatchObject({ field: 'input_reference', message: expect.stringContaining('input_reference') });
  });

  test('reports monotonic progress from 0 to 99, awaiting each report', async () => {
    const reports: number[] = [];
    let settled = 0;
    await renderVideo({
      ...small, frames: 40,
      onProgress: async (percent) => {
        reports.push(percent);
        await new Promise((resolve) => setTimeout(resolve, 1));
        settled += 1;
      },
    });
    expect(reports[0]).toBe(0);
    expect(reports.at(-1)).toBe(99);
    for (let index = 1; index < reports.length; index += 1) expect(reports[index]).toBeGreaterThan(reports[index - 1]);
    expect(settled).toBe(reports.length);
  });

  test('stops promptly with an AbortError when cancelled between frames', async () => {
    const controller = new AbortController();
    const reports: number[] = [];
    let cancelScheduled = false;
    const rendering = renderVideo({
      ...small, frames: 200, signal: controller.signal,
      onProgress: (percent) => {
        reports.push(percent);
        // Cancel from outside the render, as a gRPC cancel would arrive: on a later timer tick.
        if (percent >= 10 && !cancelScheduled) {
          cancelScheduled = true;
          setTimeout(() => controller.abort(), 0);
        }
      },
    });
    await expect(rendering).rejects.toMatchObject({ name: 'AbortError' });
    expect(Math.max(...reports)).toBeLessThan(30);
  });

  test('rejects with the abort reason, before any work when already aborted', async () => {
    const reason = new Error('job cancelled by client');
    const onProgress = jest.fn();
    await expect(renderVideo({ ...small, signal: AbortSignal.abort(reason), onProgress })).rejects.toBe(reason);
    expect(onProgress).not.toHaveBeenCalled();
  });

  test('rejects impossible timing', async () => {
    await expect(renderVideo({ ...small, fps: 0 })).rejects.toThrow(RangeError);
    await expect(renderVideo({ ...small, frames: 0 })).rejects.toThrow(/frames must be a positive integer/);
    await expect(renderVideo({ ...small, frames: 2.5 })).rejects.toThrow(RangeError);
  });

  describe('read by ffmpeg', () => {
    const hasFfmpegTools = isInstalled('ffprobe') && isInstalled('ffmpeg');
    let directory: string;
    beforeAll(() => {
      directory = fs.mkdtempSync(path.join(os.tmpdir(), 'render-video-'));
    });
    afterAll(() => fs.rmSync(directory, { recursive: true, force: true }));

    // ffprobe is not on a fresh laptop; there readMp4Info (tested above) is the only check.
    (hasFfmpegTools ? test : test.skip)('ffprobe reports the frames, rate and size, and ffmpeg decodes every frame cleanly', async () => {
      const file = path.join(directory, 'video.mp4');
      fs.writeFileSync(file, await renderVideo({ width: 160, height: 90, fps: 16, frames: 24, prompt: 'probe me', seed: 1 }));
      const probe = JSON.parse(execFileSync('ffprobe', [
        '-v', 'error', '-select_streams', 'v:0', '-count_frames',
        '-show_entries', 'stream=codec_name,width,height,r_frame_rate,nb_frames,nb_read_frames', '-of', 'json', file,
      ], { encoding: 'utf8' }));
      expect(probe.streams[0]).toEqual({
        codec_name: 'mjpeg', width: 160, height: 90, r_frame_rate: '16/1', nb_frames: '24', nb_read_frames: '24',
      });
      // ffmpeg reports damaged frames on stderr and still exits 0, so both must be checked.
      const decode = spawnSync('ffmpeg', ['-v', 'error', '-i', file, '-f', 'null', '-'], { encoding: 'utf8' });
      expect({ status: decode.status, errors: decode.stderr }).toEqual({ status: 0, errors: '' });
    });
  });
});
