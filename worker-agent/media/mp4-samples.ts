/**
 * The encoded frames of an MP4's video track, in decode order, located through the sample
 * tables (stsz sizes, stsc samples per chunk, stco/co64 chunk offsets). For Motion JPEG each
 * sample is a complete JPEG, so this is how to take a poster frame without a video decoder.
 */
import {
  childBoxes, findBox, Mp4FormatError, readUint32, readUint64, requireBox, requirePath, videoTrack, type BoxRange,
} from './mp4-box-reader';

/** Views into `bytes` (not copies); throws Mp4FormatError when the tables do not fit the file. */
export function readMp4Samples(bytes: Buffer): Buffer[] {
  const sampleTable = requirePath(bytes, videoTrack(bytes), ['mdia', 'minf', 'stbl']);
  const sizes = sampleSizes(bytes, requireBox(bytes, sampleTable, 'stsz'));
  const offsets = chunkOffsets(bytes, sampleTable);
  const sampleToChunk = requireBox(bytes, sampleTable, 'stsc');
  const runCount = readUint32(bytes, sampleToChunk, 4);
  const samples: Buffer[] = [];
  for (let run = 0; run < runCount && samples.length < sizes.length; run += 1) {
    const at = 8 + run * 12;
    const firstChunk = readUint32(bytes, sampleToChunk, at);
    const samplesPerChunk = readUint32(bytes, sampleToChunk, at + 4);
    // A run lasts until the next run's first chunk, the last run until the last chunk.
    // Capped at the chunks that exist so a corrupt table cannot spin through billions of them.
    const nextFirstChunk = Math.min(run + 1 < runCount ? readUint32(bytes, sampleToChunk, at + 12) : Infinity, offsets.length + 1);
    for (let chunk = firstChunk; chunk < nextFirstChunk && samples.length < sizes.length; chunk += 1) {
      let position = offsets[chunk - 1];
      for (let inChunk = 0; inChunk < samplesPerChunk && samples.length < sizes.length; inChunk += 1) {
        const size = sizes[samples.length];
        if (position === undefined || position + size > bytes.length) throw new Mp4FormatError(`sample ${samples.length + 1} lies outside the file`);
        samples.push(bytes.subarray(position, position + size));
        position += size;
      }
    }
  }
  if (samples.length !== sizes.length) throw new Mp4FormatError(`stsc maps ${samples.length} of ${sizes.length} samples`);
  return samples;
}

function sampleSizes(bytes: Buffer, sampleSize: BoxRange): number[] {
  const uniformSize = readUint32(bytes, sampleSize, 4);
  const count = readUint32(bytes, sampleSize, 8);
  if (uniformSize !== 0) {
    if (uniformSize * count > bytes.length) throw new Mp4FormatError(`stsz claims ${count} samples of ${uniformSize} bytes, more than the file holds`);
    return new Array<number>(count).fill(uniformSize);
  }
  return Array.from({ length: count }, (_, index) => readUint32(bytes, sampleSize, 12 + index * 4));
}

function chunkOffsets(bytes: Buffer, sampleTable: BoxRange): number[] {
  const table = findBox(childBoxes(bytes, sampleTable.start, sampleTable.end), (box) => box.type === 'stco' || box.type === 'co64');
  if (!table) throw new Mp4FormatError('the MP4 has no stco or co64 box in stbl');
  const count = readUint32(bytes, table, 4);
  return Array.from({ length: count }, (_, index) => (table.type === 'co64' ? readUint64(bytes, table, 8 + index * 8) : readUint32(bytes, table, 8 + index * 4)));
}
