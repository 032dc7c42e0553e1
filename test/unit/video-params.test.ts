import { Catalog } from '../../control-plane/catalog/catalog';
import { AppError } from '../../control-plane/errors/app-error';
import { FieldReader } from '../../control-plane/requests/field-reader';
import { readVideoParams, snapDown32, snapFrameCount } from '../../control-plane/requests/video-params';

const catalog = Catalog.load();
const pinned = catalog.get('Wan-AI/Wan2.1-T2V-1.3B');
const unpinned = catalog.get('Lightricks/LTX-Video');

describe('video parameter rules', () => {
  it.each([[1, 5], [4, 5], [5, 5], [6, 5], [7, 9], [8, 9], [20, 21], [48, 49], [80, 81], [119, 121], [120.5, 121]])('snaps %d frames to %d (4n+1, min 5)', (frames, snapped) => {
    expect(snapFrameCount(frames)).toBe(snapped);
  });

  it.each([[720, 704], [1280, 1280], [481, 480], [31, 32], [64, 64]])('snaps %d px down to %d (multiple of 32, min 32)', (pixels, snapped) => {
    expect(snapDown32(pixels)).toBe(snapped);
  });

  it('a pinned model accepts its native duration ±0.5 s and exactly its fps', () => {
    const ok = readVideoParams(new FieldReader({ prompt: 'x', seconds: '5.5', size: '832x480', fps: '16' }, true), pinned, 'videos', false);
    expect(ok).toMatchObject({ fps: 16, frames: 81, width: 832, height: 480, seconds: '5.5' });
    const tooLong = () => readVideoParams(new FieldReader({ prompt: 'x', seconds: '5.6', size: '832x480' }, true), pinned, 'videos', false);
    expect(tooLong).toThrow(expect.objectContaining({ code: 'duration_mismatch' }) as unknown as AppError);
    const wrongFps = () => readVideoParams(new FieldReader({ prompt: 'x', seconds: '5', size: '832x480', fps: '15' }, true), pinned, 'videos', false);
    expect(wrongFps).toThrow(expect.objectContaining({ code: 'fps_mismatch' }) as unknown as AppError);
  });

  it.each([
    ['videos', { prompt: 'x', seconds: '5', size: '832x480' }],
    ['videos/generations', { prompt: 'x', resolution: '832x480' }],
  ] as const)('an omitted fps is the contract\'s 24 on a pinned model too: %s answers fps_mismatch naming the native 16', (route, fields) => {
    const read = () => readVideoParams(new FieldReader(fields, route === 'videos'), pinned, route, false);
    expect(read).toThrow(expect.objectContaining({
      code: 'fps_mismatch', param: 'fps', message: expect.stringMatching(/fps must be 16 \(got 24, the default when fps is omitted\)/),
    }) as unknown as AppError);
  });

  it.each([
    ['videos', { prompt: 'x', seconds: '2', size: '704x480' }],
    ['videos/generations', { prompt: 'x', resolution: '704x480', duration: 2 }],
  ] as const)('an omitted fps is 24 on an unpinned model: %s renders 2 s as 49 frames', (route, fields) => {
    expect(readVideoParams(new FieldReader(fields, route === 'videos'), unpinned, route, false)).toMatchObject({ fps: 24, frames: 49 });
  });

  it('an unpinned model honours duration × fps; the JSON route snaps the resolution and defaults to 720x1280, 5 s, 24 fps', () => {
    expect(readVideoParams(new FieldReader({ prompt: 'x', seconds: 3, size: '1280x720', fps: 30 }, false), unpinned, 'videos', false))
      .toMatchObject({ width: 1280, height: 720, fps: 30, frames: 89 });
    expect(readVideoParams(new FieldReader({ prompt: 'x' }, false), unpinned, 'videos/generations', false))
      .toMatchObject({ width: 704, height: 1280, size: '720x1280', fps: 24, frames: 121, seconds: '5' });
  });
});
