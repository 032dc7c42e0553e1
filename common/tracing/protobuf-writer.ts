/**
 * The protobuf wire format, written into one growable buffer (the few encodings OTLP's trace
 * messages use). Length-delimited messages reserve room for their length, are written in place,
 * and the length is filled in at the end (shifting the bytes when it needs more room than was
 * reserved), so no message is sized twice and nothing is allocated per field.
 */
export class ProtobufWriter {
  /** Bytes written so far (the next write goes here). */
  length = 0;
  private bytes: Buffer;

  constructor(initialCapacity = 64 * 1024) {
    this.bytes = Buffer.allocUnsafe(initialCapacity);
  }

  get capacity(): number {
    return this.bytes.length;
  }

  /** The bytes from `start` to `end` (a view: valid until the next write, truncate or compact). */
  view(start = 0, end = this.length): Buffer {
    return this.bytes.subarray(start, end);
  }

  /** Forgets everything from `length` on (a message whose encoding failed half way). */
  truncate(length: number): void {
    this.length = length;
  }

  /** Drops the first `count` bytes, moving the rest to the front. */
  compact(count: number): void {
    this.bytes.copyWithin(0, count, this.length);
    this.length -= count;
  }

  /** Starts over with a buffer of `capacity` (after a burst made this one large). */
  reset(capacity: number): void {
    this.bytes = Buffer.allocUnsafe(capacity);
    this.length = 0;
  }

  tag(field: number, wireType: 0 | 1 | 2 | 5): void {
    const key = (field << 3) | wireType;
    if (key > 0x7f) {
      this.varint(key);
      return;
    }
    this.ensure(1);
    this.bytes[this.length++] = key;
  }

  /** A varint of any integer in int64's range: negative ones as their 64-bit two's complement (10 bytes), as protobuf's int64 has them. */
  varint(value: number): void {
    this.ensure(10);
    const bytes = this.bytes;
    if (value >= 0 && value <= 0xffff_ffff) {
      let rest = value >>> 0;
      while (rest > 0x7f) {
        bytes[this.length++] = (rest & 0x7f) | 0x80;
        rest >>>= 7;
      }
      bytes[this.length++] = rest;
      return;
    }
    const magnitude = Math.abs(value);
    let low = magnitude >>> 0;
    let high = (magnitude / 0x1_0000_0000) >>> 0;
    if (value < 0) {
      low = (~low + 1) >>> 0;
      high = (~high + (low === 0 ? 1 : 0)) >>> 0;
    }
    while (high > 0 || low > 0x7f) {
      bytes[this.length++] = (low & 0x7f) | 0x80;
      low = ((low >>> 7) | (high << 25)) >>> 0;
      high >>>= 7;
    }
    bytes[this.length++] = low;
  }

  fixed32(value: number): void {
    this.ensure(4);
    this.littleEndian32(value >>> 0);
  }

  fixed64(low: number, high: number): void {
    this.ensure(8);
    this.littleEndian32(low >>> 0);
    this.littleEndian32(high >>> 0);
  }

  double(value: number): void {
    this.ensure(8);
    this.bytes.writeDoubleLE(value, this.length);
    this.length += 8;
  }

  /** A length-delimited UTF-8 string. ASCII (nearly every name and value here) is copied char by char: cheaper than the encoder for short strings. */
  string(value: string): void {
    const count = value.length;
    if (count < 128) {
      this.ensure(1 + count);
      const start = this.length;
      const bytes = this.bytes;
      let at = start + 1;
      let index = 0;
      for (; index < count; index++) {
        const code = value.charCodeAt(index);
        if (code > 0x7f) break;
        bytes[at++] = code;
      }
      if (index === count) {
        bytes[start] = count;
        this.length = at;
        return;
      }
    }
    const size = Buffer.byteLength(value, 'utf8');
    this.varint(size);
    this.ensure(size);
    this.length += this.bytes.write(value, this.length, size, 'utf8');
  }

  /**
   * Field 1 as a string: a KeyValue's key. Keys are the code's own attribute names, the same few
   * dozen on every span, so each one's bytes are encoded once and copied after (the char-by-char
   * copy of every key was the encoder's largest cost in a server's profile).
   */
  key(value: string): void {
    let encoded = KEY_BYTES.get(value);
    if (encoded === undefined) {
      if (KEY_BYTES.size >= KEY_CACHE_LIMIT) {
        this.tag(1, 2);
        this.string(value);
        return;
      }
      const writer = new ProtobufWriter(value.length * 3 + 8);
      writer.tag(1, 2);
      writer.string(value);
      encoded = Uint8Array.from(writer.view());
      KEY_BYTES.set(value, encoded);
    }
    this.copy(encoded);
  }

  /**
   * Field `field` as a KeyValue whose value is a string (an attribute). Most of a span's
   * attributes repeat from request to request (a model, a deployment, a route, a method), so a
   * pair's whole encoded message is kept once written and copied after; values that do not repeat
   * (request ids) fill their key's share of the cache and are then written as they come.
   */
  stringKeyValue(field: number, key: string, value: string): void {
    this.tag(field, 2);
    let values = KEY_VALUES.get(key);
    if (values === undefined && KEY_VALUES.size < KEY_CACHE_LIMIT) {
      values = new Map();
      KEY_VALUES.set(key, values);
    }
    const encoded = values?.get(value);
    if (encoded !== undefined) {
      this.copy(encoded);
      return;
    }
    const start = this.length;
    const begun = this.begin();
    this.key(key);
    this.tag(2, 2);
    const valueBegun = this.begin();
    this.tag(1, 2);
    this.string(value);
    this.end(valueBegun);
    this.end(begun);
    if (values !== undefined && values.size < VALUES_PER_KEY && cachedKeyValues < KEY_VALUE_CACHE_LIMIT && value.length <= MAX_CACHED_VALUE) {
      values.set(value, Uint8Array.from(this.bytes.subarray(start, this.length)));
      cachedKeyValues++;
    }
  }

  /** Length-delimited bytes. */
  bytesField(value: Uint8Array): void {
    this.varint(value.length);
    this.ensure(value.length);
    this.bytes.set(value, this.length);
    this.length += value.length;
  }

  /** Length-delimited bytes given as hex (a trace or span id: 8 or 16 bytes). Parsed here: three ids a span made `Buffer.write(…, 'hex')` a tenth of the encoder's time. */
  hex(value: string): void {
    const size = value.length >>> 1;
    this.varint(size);
    this.ensure(size);
    const bytes = this.bytes;
    let at = this.length;
    for (let index = 0; index < size * 2; index += 2) bytes[at++] = (HEX_DIGITS[value.charCodeAt(index) & 0x7f] << 4) | HEX_DIGITS[value.charCodeAt(index + 1) & 0x7f];
    this.length = at;
  }

  /** Already-encoded bytes, as they are. */
  raw(value: Uint8Array): void {
    this.ensure(value.length);
    this.bytes.set(value, this.length);
    this.length += value.length;
  }

  /** Starts a length-delimited message (its tag already written); returns what `end` takes. `reserve`: bytes guessed for its length. */
  begin(reserve = 1): number {
    this.ensure(reserve);
    const start = this.length;
    this.length += reserve;
    return start * 8 + reserve;
  }

  /** Writes the length of the message `begin` started, moving its bytes when the guess was wrong. */
  end(begun: number): void {
    const reserve = begun & 7;
    const start = (begun - reserve) / 8;
    const size = this.length - start - reserve;
    const needed = lengthSize(size);
    if (needed !== reserve) {
      this.ensure(needed - reserve);
      this.bytes.copyWithin(start + needed, start + reserve, this.length);
      this.length += needed - reserve;
    }
    let at = start;
    let rest = size;
    while (rest > 0x7f) {
      this.bytes[at++] = (rest & 0x7f) | 0x80;
      rest >>>= 7;
    }
    this.bytes[at] = rest;
  }

  /** Short encoded bytes, copied byte by byte (cheaper than `set` for a few dozen bytes). */
  private copy(encoded: Uint8Array): void {
    this.ensure(encoded.length);
    const bytes = this.bytes;
    let at = this.length;
    for (let index = 0; index < encoded.length; index++) bytes[at++] = encoded[index];
    this.length = at;
  }

  private littleEndian32(value: number): void {
    const bytes = this.bytes;
    bytes[this.length++] = value & 0xff;
    bytes[this.length++] = (value >>> 8) & 0xff;
    bytes[this.length++] = (value >>> 16) & 0xff;
    bytes[this.length++] = value >>> 24;
  }

  private ensure(extra: number): void {
    if (this.length + extra <= this.bytes.length) return;
    const grown = Buffer.allocUnsafe(Math.max(this.bytes.length * 2, this.length + extra));
    this.bytes.copy(grown, 0, 0, this.length);
    this.bytes = grown;
  }
}

/** Encoded keys (ProtobufWriter.key), shared by every writer; bounded, since a key could come from anywhere. */
const KEY_BYTES = new Map<string, Uint8Array>();
const KEY_CACHE_LIMIT = 1_024;

/**
 * Encoded string attributes (ProtobufWriter.stringKeyValue): per key, its values' whole KeyValue
 * messages. Bounded three ways, since keys and values could come from anywhere: keys (as
 * KEY_BYTES), values per key, and entries in all (at most ~2 MB).
 */
const KEY_VALUES = new Map<string, Map<string, Uint8Array>>();
const VALUES_PER_KEY = 64;
const KEY_VALUE_CACHE_LIMIT = 8_192;
const MAX_CACHED_VALUE = 200;
let cachedKeyValues = 0;

/** The value of each ASCII hex digit (either case); other characters read as 0. */
const HEX_DIGITS = new Uint8Array(128);
for (let digit = 0; digit < 16; digit++) {
  HEX_DIGITS['0123456789abcdef'.charCodeAt(digit)] = digit;
  HEX_DIGITS['0123456789ABCDEF'.charCodeAt(digit)] = digit;
}

/** Bytes of a length's varint. */
export function lengthSize(value: number): number {
  return value < 0x80 ? 1 : value < 0x4000 ? 2 : value < 0x20_0000 ? 3 : value < 0x1000_0000 ? 4 : 5;
}
