/**
 * Guards against sizes the renderers cannot honour. Callers validate requests first; these
 * checks exist so a caller bug fails with a clear RangeError instead of a multi-gigabyte
 * allocation or a corrupt file.
 */

/** JPEG frames and the 16-bit sizes of an MP4 sample entry both stop at 65535; 8192 keeps one RGB frame under 200 MB. */
export const MAX_MEDIA_DIMENSION = 8192;

export function assertDimensions(width: number, height: number): void {
  for (const [name, value] of [['width', width], ['height', height]] as const) {
    if (!Number.isInteger(value) || value < 1 || value > MAX_MEDIA_DIMENSION) {
      throw new RangeError(`${name} must be an integer from 1 to ${MAX_MEDIA_DIMENSION}, got ${value}`);
    }
  }
}
