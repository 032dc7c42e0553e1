import { encodePng } from './encode-png';
import { assertDimensions } from './media-dimensions';
import { mediaSeed } from './media-seed';
import { SeededPattern } from './seeded-pattern';

export interface RenderImageOptions {
  width: number;
  height: number;
  prompt: string;
  /** @default derived from the prompt, so unseeded requests are still repeatable */
  seed?: number;
  negativePrompt?: string;
  /** Has no cost here; it changes the picture as it would a diffusion model's. */
  steps?: number;
  guidanceScale?: number;
}

/** The CPU engine's text-to-image: a width×height RGB PNG, byte-identical for equal options. */
export async function renderImage(options: RenderImageOptions): Promise<Buffer> {
  assertDimensions(options.width, options.height);
  const seed = mediaSeed('image', options.prompt, options.seed, options.negativePrompt ?? '', options.steps ?? null, options.guidanceScale ?? null);
  const pixels = new SeededPattern(seed).render(options.width, options.height);
  return await encodePng(pixels, options.width, options.height);
}
