/**
 * Writes one Motion JPEG video track as an MP4 file. The sample entry is `mp4v` with an esds
 * objectTypeIndication of 0x6C (ISO/IEC 10918-1 JPEG): what ffmpeg's own mp4 muxer writes
 * for MJPEG, so ffprobe, ffmpeg and VLC read it without complaint. The moov box comes first
 * ("fast start") so a player can begin before the whole file arrives.
 */
import { box, descriptor, fixed16, fourcc, fullBox, UNITY_MATRIX, uint16, uint32, uint32List, uint8 } from './mp4-boxes';

export interface MjpegTrack {
  width: number;
  height: number;
  /** Frames per second; fractional rates such as 29.97 are kept to a thousandth. */
  fps: number;
  /** One complete JPEG per frame, in display order. */
  frames: readonly Buffer[];
}

/** mvhd's clock: milliseconds are precise enough for a duration nobody seeks by. */
const MOVIE_TIMESCALE = 1000;
/** Each frame lasts this many media ticks; the media clock runs at fps × this. */
const TICKS_PER_FRAME = 1000;
const JPEG_OBJECT_TYPE = 0x6c;
const VISUAL_STREAM_TYPE = 0x04;

export function writeMjpegMp4(track: MjpegTrack): Buffer {
  if (track.frames.length === 0) throw new RangeError('an MP4 video track needs at least one frame');
  const fileType = box('ftyp', fourcc('isom'), uint32(0x200), fourcc('isom', 'iso2', 'mp41'));
  const mediaData = Buffer.concat(track.frames);
  // Chunk offsets are fixed-width, so the moov size does not depend on them: size it, then place the data after it.
  const sizing = movie(track, 0, mediaData.length);
  const movieBox = movie(track, fileType.length + sizing.length + 8, mediaData.length);
  return Buffer.concat([fileType, movieBox, box('mdat', mediaData)]);
}

function movie(track: MjpegTrack, dataOffset: number, dataLength: number): Buffer {
  const frameCount = track.frames.length;
  const mediaTimescale = Math.round(track.fps * TICKS_PER_FRAME);
  const mediaDuration = frameCount * TICKS_PER_FRAME;
  const movieDuration = Math.round((mediaDuration * MOVIE_TIMESCALE) / mediaTimescale);
  const header = fullBox('mvhd', 0, 0,
    uint32(0, 0, MOVIE_TIMESCALE, movieDuration),
    uint32(0x00010000), uint16(0x0100), Buffer.alloc(10), // rate 1.0, volume 1.0, reserved
    UNITY_MATRIX, Buffer.alloc(24), uint32(2)); // pre_defined, next_track_ID
  const trackHeader = fullBox('tkhd', 0, 0x3, // enabled and in the movie
    uint32(0, 0, 1, 0, movieDuration), Buffer.alloc(8),
    uint16(0, 0, 0, 0), // layer, alternate_group, volume (none for video), reserved
    UNITY_MATRIX, fixed16(track.width), fixed16(track.height));
  const mediaHeader = fullBox('mdhd', 0, 0, uint32(0, 0, mediaTimescale, mediaDuration), uint16(0x55c4, 0)); // language "und"
  const handler = fullBox('hdlr', 0, 0, uint32(0), fourcc('vide'), Buffer.alloc(12), Buffer.from('VideoHandler\0', 'latin1'));
  const mediaInformation = box('minf',
    fullBox('vmhd', 0, 1, uint16(0, 0, 0, 0)),
    box('dinf', fullBox('dref', 0, 0, uint32(1), fullBox('url ', 0, 1))), // flag 1: data is in this file
    sampleTable(track, mediaTimescale, dataOffset, dataLength));
  return box('moov', header, box('trak', trackHeader, box('mdia', mediaHeader, handler, mediaInformation)));
}

function sampleTable(track: MjpegTrack, mediaTimescale: number, dataOffset: number, dataLength: number): Buffer {
  const sizes = track.frames.map((frame) => frame.length);
  const largest = sizes.reduce((most, size) => Math.max(most, size), 0);
  const durationSeconds = track.frames.length * TICKS_PER_FRAME / mediaTimescale;
  const averageBitrate = Math.min(0xffffffff, Math.round((dataLength * 8) / durationSeconds));
  const peakBitrate = Math.min(0xffffffff, Math.round(largest * 8 * track.fps));
  const elementaryStream = fullBox('esds', 0, 0, descriptor(0x03, uint16(1), uint8(0), // ES_ID, no dependencies
    descriptor(0x04, uint8(JPEG_OBJECT_TYPE, (VISUAL_STREAM_TYPE << 2) | 1),
      uint8((largest >>> 16) & 0xff), uint16(largest & 0xffff), uint32(peakBitrate, averageBitrate)),
    descriptor(0x06, uint8(0x02)))); // SLConfig predefined for MP4 files
  const compressorName = Buffer.alloc(32);
  compressorName.write('\x0bMotion JPEG', 'latin1');
  const sampleEntry = box('mp4v', Buffer.alloc(6), uint16(1), // reserved, data_reference_index
    Buffer.alloc(16), uint16(track.width, track.height),
    uint32(0x00480000, 0x00480000, 0), uint16(1), // 72 dpi both ways, reserved, frame_count
    compressorName, uint16(0x0018, 0xffff), elementaryStream); // depth: colour, pre_defined -1
  return box('stbl',
    fullBox('stsd', 0, 0, uint32(1), sampleEntry),
    fullBox('stts', 0, 0, uint32(1, track.frames.length, TICKS_PER_FRAME)),
    // Every JPEG is a key frame, so no stss: its absence means "all samples are sync samples".
    fullBox('stsc', 0, 0, uint32(1, 1, track.frames.length, 1)), // one chunk holds every frame
    fullBox('stsz', 0, 0, uint32(0, sizes.length), uint32List(sizes)),
    fullBox('stco', 0, 0, uint32(1, dataOffset)));
}
