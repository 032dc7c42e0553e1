/**
 * Reads the facts a caller checks about an MP4 video (size, frame count, rate, codec) from its
 * boxes, without decoding any frame. Enough for files this package writes and for ordinary
 * single-video-track MP4s; fragmented MP4 (moof) is not supported.
 */
import {
  childBoxes, findBox, Mp4FormatError, readUint32, readUint64, requireBox, requirePath, videoTrack, type BoxRange,
} from './mp4-box-reader';

export interface Mp4Info {
  width: number;
  height: number;
  /** Samples in the video track (stsz). */
  frames: number;
  /** Frames per media-clock second: frames × timescale ÷ the summed stts deltas. */
  fps: number;
  /** The video track's duration (mdhd). */
  durationSeconds: number;
  /** The sample entry's four-character code, e.g. `mp4v`, `avc1`, `jpeg`. */
  codec: string;
  /** From the esds box, when there is one: 0x6C is JPEG, 0x20 MPEG-4 Part 2. */
  objectTypeIndication?: number;
}

/** Size of the fixed part of a VisualSampleEntry, after which its child boxes (esds…) start. */
const VISUAL_SAMPLE_ENTRY_LENGTH = 78;

/** Throws Mp4FormatError when the bytes are not an MP4 with a video track. */
export function readMp4Info(bytes: Buffer): Mp4Info {
  const track = videoTrack(bytes);
  const sampleTable = requirePath(bytes, track, ['mdia', 'minf', 'stbl']);
  const { width, height } = trackSize(bytes, requireBox(bytes, track, 'tkhd'));
  const { timescale, duration } = mediaClock(bytes, requirePath(bytes, track, ['mdia', 'mdhd']));
  const frames = readUint32(bytes, requireBox(bytes, sampleTable, 'stsz'), 8);
  const timeToSample = requireBox(bytes, sampleTable, 'stts');
  let ticks = 0;
  const entryCount = readUint32(bytes, timeToSample, 4);
  for (let entry = 0; entry < entryCount; entry += 1) {
    ticks += readUint32(bytes, timeToSample, 8 + entry * 8) * readUint32(bytes, timeToSample, 12 + entry * 8);
  }
  const sampleDescription = requireBox(bytes, sampleTable, 'stsd');
  // stsd is a full box with an entry count; its first entry's type is the codec.
  const sampleEntry = findBox(childBoxes(bytes, sampleDescription.start + 8, sampleDescription.end), () => true);
  if (!sampleEntry) throw new Mp4FormatError('the video track has no sample description');
  return {
    width,
    height,
    frames,
    fps: ticks > 0 ? (frames * timescale) / ticks : 0,
    durationSeconds: timescale > 0 ? duration / timescale : 0,
    codec: sampleEntry.type,
    objectTypeIndication: objectTypeOf(bytes, sampleEntry),
  };
}

/** tkhd version 0 has 32-bit times, version 1 64-bit; width and height are 16.16 fixed point. */
function trackSize(bytes: Buffer, trackHeader: BoxRange) {
  const at = bytes[trackHeader.start] === 1 ? 88 : 76;
  return { width: readUint32(bytes, trackHeader, at) / 0x10000, height: readUint32(bytes, trackHeader, at + 4) / 0x10000 };
}

function mediaClock(bytes: Buffer, mediaHeader: BoxRange) {
  if (bytes[mediaHeader.start] === 1) return { timescale: readUint32(bytes, mediaHeader, 20), duration: readUint64(bytes, mediaHeader, 24) };
  return { timescale: readUint32(bytes, mediaHeader, 12), duration: readUint32(bytes, mediaHeader, 16) };
}

/** Walks esds → ES_Descriptor (0x03) → DecoderConfigDescriptor (0x04) to its first byte. */
function objectTypeOf(bytes: Buffer, sampleEntry: BoxRange): number | undefined {
  const childrenStart = sampleEntry.start + VISUAL_SAMPLE_ENTRY_LENGTH;
  const esds = childrenStart <= sampleEntry.end
    ? findBox(childBoxes(bytes, childrenStart, sampleEntry.end), (box) => box.type === 'esds')
    : undefined;
  if (!esds) return undefined;
  // Descriptor bytes are read unchecked: past the box they read as undefined, which matches no tag.
  let at = esds.start + 4;
  const skipDescriptorHeader = (tag: number): boolean => {
    if (bytes[at] !== tag) return false;
    at += 1;
    while (at < esds.end && bytes[at] & 0x80) at += 1; // expandable size: only its length matters here
    at += 1;
    return true;
  };
  if (!skipDescriptorHeader(0x03)) return undefined;
  const flags = bytes[at + 2];
  at += 3;
  if (flags & 0x80) at += 2; // dependsOn_ES_ID
  if (flags & 0x40) at += 1 + bytes[at]; // URL
  if (flags & 0x20) at += 2; // OCR_ES_Id
  return skipDescriptorHeader(0x04) && at < esds.end ? bytes[at] : undefined;
}
