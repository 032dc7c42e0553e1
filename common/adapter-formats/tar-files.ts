import { AdapterFormatError } from './adapter-format-error';

const BLOCK = 512;

/**
 * The regular files of a tar archive (POSIX ustar, pax and GNU long names), by path. A PEFT
 * adapter arrives as one (adapter_config.json + adapter_model.safetensors), read by the control
 * plane to validate it and by the agent to unpack it. Links, devices and directories are
 * skipped (nothing here follows a link); a path that is absolute or climbs out (`..`) is
 * refused, since the agent writes entries to disk. Every header's checksum is checked and every
 * size is bounded by the bytes present, so a hostile archive costs one pass over its bytes.
 */
export function tarFiles(bytes: Buffer): Map<string, Buffer> {
  const files = new Map<string, Buffer>();
  let offset = 0;
  let longName: string | null = null;
  while (offset + BLOCK <= bytes.length) {
    const header = bytes.subarray(offset, offset + BLOCK);
    if (header.every((byte) => byte === 0)) return files; // the end-of-archive blocks
    checkChecksum(header, offset);
    const size = sizeOf(header, offset);
    const dataStart = offset + BLOCK;
    if (dataStart + size > bytes.length) throw new AdapterFormatError('tar', `the tar entry at byte ${offset} claims ${size} bytes past the end of the archive`);
    const data = bytes.subarray(dataStart, dataStart + size);
    const type = String.fromCharCode(header[156] || 0x30);
    offset = dataStart + Math.ceil(size / BLOCK) * BLOCK;
    if (type === 'x') { longName = paxPath(data) ?? longName; continue; }
    if (type === 'L') { longName = cString(data); continue; }
    const name = longName ?? headerName(header);
    longName = null;
    if (type !== '0' && type !== '7') continue; // directories, links, devices, global pax headers
    files.set(safePath(name), data);
  }
  if (offset < bytes.length || files.size === 0) throw new AdapterFormatError('tar', 'the file is not a complete tar archive');
  return files;
}

function checkChecksum(header: Buffer, offset: number): void {
  const stored = parseInt(cString(header.subarray(148, 156)).trim() || 'x', 8);
  let sum = 0;
  for (let i = 0; i < BLOCK; i++) sum += i >= 148 && i < 156 ? 0x20 : header[i]!;
  if (stored !== sum) throw new AdapterFormatError('tar', `the tar header at byte ${offset} has a bad checksum (not a tar archive, or a damaged one)`);
}

/** Octal, or GNU base-256 for entries past 8 GiB (high bit set). */
function sizeOf(header: Buffer, offset: number): number {
  const field = header.subarray(124, 136);
  if (field[0]! & 0x80) {
    let size = 0;
    for (let i = 1; i < field.length; i++) size = size * 256 + field[i]!;
    return size;
  }
  const size = parseInt(cString(field).trim() || '0', 8);
  if (!Number.isSafeInteger(size) || size < 0) throw new AdapterFormatError('tar', `the tar header at byte ${offset} has an unreadable size`);
  return size;
}

function headerName(header: Buffer): string {
  const name = cString(header.subarray(0, 100));
  const prefix = header.subarray(257, 262).toString('latin1') === 'ustar' ? cString(header.subarray(345, 500)) : '';
  return prefix ? `${prefix}/${name}` : name;
}

/** The `path` record of a pax extended header ("<len> path=<value>\n" records). */
function paxPath(data: Buffer): string | null {
  const text = data.toString('utf8');
  let at = 0;
  let path: string | null = null;
  while (at < text.length) {
    const space = text.indexOf(' ', at);
    const length = Number(text.slice(at, space));
    if (space < 0 || !Number.isSafeInteger(length) || length <= 0) break;
    const record = text.slice(space + 1, at + length - 1);
    if (record.startsWith('path=')) path = record.slice(5);
    at += length;
  }
  return path;
}

function safePath(name: string): string {
  const path = name.replace(/^\.\//, '');
  if (!path || path.startsWith('/') || path.split('/').some((part) => part === '..')) {
    throw new AdapterFormatError('tar', `the tar entry "${path.slice(0, 100)}" is not a relative path inside the archive`);
  }
  return path;
}

function cString(bytes: Buffer): string {
  const end = bytes.indexOf(0);
  return bytes.subarray(0, end < 0 ? bytes.length : end).toString('utf8');
}
