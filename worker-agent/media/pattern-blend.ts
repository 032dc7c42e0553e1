/**
 * Repaints a picture in a pattern's colours while keeping the picture's light and shade, so
 * an edit or an animated reference is recognisably derived from its input.
 */

/**
 * Raw RGB `picture` moved `strength` (0 = unchanged, 1 = fully recoloured) towards `pattern`
 * shaded by the picture's luminance. With `editable`, only pixels whose entry is 1 change.
 */
export function blendWithPattern(picture: Buffer, pattern: Buffer, strength: number, editable?: Uint8Array): Buffer {
  const output = Buffer.from(picture);
  const keep = 1 - strength;
  const pixelCount = picture.length / 3;
  for (let pixel = 0; pixel < pixelCount; pixel += 1) {
    if (editable && editable[pixel] === 0) continue;
    const at = pixel * 3;
    const red = picture[at];
    const green = picture[at + 1];
    const blue = picture[at + 2];
    // Rec. 601 luma, remapped so that black areas still show a dark version of the pattern.
    const shade = 0.25 + (0.75 * (0.299 * red + 0.587 * green + 0.114 * blue)) / 255;
    // `+ 0.5 | 0` rounds these non-negative values without a per-pixel lookup of the global
    // Math, which is slow inside vm contexts such as jest's.
    output[at] = (keep * red + strength * shade * pattern[at] + 0.5) | 0;
    output[at + 1] = (keep * green + strength * shade * pattern[at + 1] + 0.5) | 0;
    output[at + 2] = (keep * blue + strength * shade * pattern[at + 2] + 0.5) | 0;
  }
  return output;
}
