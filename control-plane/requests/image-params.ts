import type { CatalogModel } from '../catalog/catalog';
import { AppError } from '../errors/app-error';
import type { FieldReader } from './field-reader';
import { parseSize, readGenerationControls, sortedSizes, type GenerationControls } from './media-model';
import { MAX_WEBHOOK_URL_LENGTH } from '../network/webhook-url';
import { shortened } from '../errors/quote-value';

export const MAX_IMAGES_PER_REQUEST = 10;

/** The job body of an image generation or edit, as the agent receives it. */
export interface ImageJobParams extends GenerationControls {
  prompt: string;
  n: number;
  size: string;
  width: number;
  height: number;
  response_format: 'url' | 'b64_json';
  guidance_scale?: number;
}

/** The extension fields shared by every media call. */
export interface DeliveryOptions {
  storageCredentialId?: number;
  webhookUrl?: string;
}

/**
 * The image fields of docs/api-contract.md#images with their defaults; unknown standard fields (`style`, `quality`,
 * `user`, …) are ignored. `size: "auto"` (an OpenAI value) picks 1024x1024 when offered,
 * else the model's first size.
 */
export function readImageParams(fields: FieldReader, model: CatalogModel): { params: ImageJobParams; delivery: DeliveryOptions } {
  const prompt = fields.string('prompt', { required: true })!;
  const n = fields.integer('n', 1, MAX_IMAGES_PER_REQUEST) ?? 1;
  const requested = fields.string('size', { maxLength: 32 }) ?? '1024x1024';
  const size = requested === 'auto' ? (model.sizes.includes('1024x1024') ? '1024x1024' : model.sizes[0]) : requested;
  if (!model.sizes.includes(size)) {
    throw new AppError('size_not_supported', `size '${shortened(requested)}' is not supported by ${model.id}; supported sizes: ${sortedSizes(model.sizes).join(', ')}`, { param: 'size' });
  }
  const { width, height } = parseSize(size)!;
  const params: ImageJobParams = {
    prompt, n, size, width, height,
    response_format: fields.oneOf('response_format', ['url', 'b64_json'] as const) ?? 'url',
  };
  Object.assign(params, readGenerationControls(fields));
  const guidance = fields.decimal('guidance_scale', 0, 100);
  if (guidance !== undefined) params.guidance_scale = guidance;
  return { params, delivery: readDelivery(fields) };
}

export function readDelivery(fields: FieldReader): DeliveryOptions {
  const delivery: DeliveryOptions = {};
  const credential = fields.integer('storage_credential_id', 1, 2 ** 31 - 1);
  if (credential !== undefined) delivery.storageCredentialId = credential;
  if (fields.has('webhook_url')) delivery.webhookUrl = fields.string('webhook_url', { maxLength: MAX_WEBHOOK_URL_LENGTH });
  return delivery;
}
