import { decodeEditMask, decodeImage } from './decode-image';
import { encodePng } from './encode-png';
import { assertDimensions } from './media-dimensions';
import { mediaSeed } from './media-seed';
import { blendWithPattern } from './pattern-blend';
import { SeededPattern } from './seeded-pattern';

export interface EditImageOptions {
  /** PNG, JPEG or WebP; scaled to cover width×height and centre-cropped. */
  image: Buffer;
  /** OpenAI convention: a PNG whose fully transparent pixels mark what to edit; the rest is kept exactly. */
  mask?: Buffer;
  prompt: string;
  /** @default derived from the prompt */
  seed?: number;
  width: number;
  height: number;
}

/** Strong enough to be plainly visible, weak enough that the input stays recognisable. */
const EDIT_STRENGTH = 0.6;

/**
 * The CPU engine's image edit: the input recoloured with a prompt- and seed-derived pattern.
 * Throws MediaInputError (field `image` or `mask`) for bytes it cannot use.
 */
export async function editImage(options: EditImageOptions): Promise<Buffer> {
  const { width, height } = options;
  assertDimensions(width, height);
  const [picture, editable] = await Promise.all([
    decodeImage(options.image, 'image', width, height),
    options.mask === undefined ? undefined : decodeEditMask(options.mask, width, height),
  ]);
  const pattern = new SeededPattern(mediaSeed('edit', options.prompt, options.seed)).render(width, height);
  return await encodePng(blendWithPattern(picture, pattern, EDIT_STRENGTH, editable), width, height);
}
