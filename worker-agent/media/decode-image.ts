/**
 * Turns client-supplied image bytes into pixels at the size a renderer works at. Every sharp
 * failure becomes a MediaInputError naming the field, because here bad bytes are the
 * client's mistake, not the engine's.
 */
import sharp, { type Sharp } from 'sharp';
import { MediaInputError, type MediaInputField } from './media-input-error';

/** What OpenAI's image endpoints accept; sharp could read more (SVG, TIFF…), which we do not want to promise. */
const ACCEPTED_FORMATS: ReadonlySet<string> = new Set(['png', 'jpeg', 'webp']);

/**
 * Raw RGB pixels of `bytes`, oriented as their EXIF says, scaled to cover width×height and
 * centre-cropped. Transparency is flattened onto white, as a viewer would show it.
 */
export async function decodeImage(bytes: Buffer, field: MediaInputField, width: number, height: number): Promise<Buffer> {
  const image = await openImage(bytes, field);
  return await decodeOrThrow(field, image
    .resize(width, height, { fit: 'cover', position: 'centre' })
    .flatten({ background: '#ffffff' })
    .toColourspace('srgb')
    .removeAlpha()
    .raw());
}

/**
 * One byte per pixel of width×height: 1 where the mask is fully transparent (the OpenAI
 * convention for "edit here"), 0 elsewhere. Cropped like decodeImage so a mask the size of
 * its image stays aligned; nearest-neighbour scaling keeps "fully transparent" exact.
 */
export async function decodeEditMask(bytes: Buffer, width: number, height: number): Promise<Uint8Array> {
  const mask = await openImage(bytes, 'mask');
  const metadata = await mask.metadata();
  if (!metadata.hasAlpha) {
    throw new MediaInputError('mask', 'mask must have an alpha channel: its fully transparent pixels mark where to edit the image');
  }
  const alpha = await decodeOrThrow('mask', mask
    .resize(width, height, { fit: 'cover', position: 'centre', kernel: 'nearest' })
    .extractChannel('alpha')
    .raw());
  const editable = new Uint8Array(width * height);
  for (let index = 0; index < editable.length; index += 1) editable[index] = alpha[index] === 0 ? 1 : 0;
  return editable;
}

async function openImage(bytes: Buffer, field: MediaInputField): Promise<Sharp> {
  let format: string | undefined;
  try {
    format = (await sharp(bytes).metadata()).format;
  } catch (error) {
    throw new MediaInputError(field, `${field} could not be decoded as a PNG, JPEG or WebP image: ${messageOf(error)}`, { cause: error });
  }
  if (!format || !ACCEPTED_FORMATS.has(format)) {
    throw new MediaInputError(field, `${field} must be a PNG, JPEG or WebP image, got ${format ?? 'an unknown format'}`);
  }
  return sharp(bytes).autoOrient();
}

/** Headers can parse while the pixel data is truncated; that only shows when decoding. */
async function decodeOrThrow(field: MediaInputField, pipeline: Sharp): Promise<Buffer> {
  try {
    return await pipeline.toBuffer();
  } catch (error) {
    throw new MediaInputError(field, `${field} could not be decoded: ${messageOf(error)}`, { cause: error });
  }
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
