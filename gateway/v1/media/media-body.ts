import type { Context } from 'koa';
import { AppError, quoteValue, refuseLoneSurrogates, refuseNulBytes } from '../../../control-plane/api/errors';
import { FieldReader, parseJsonObject } from '../../../control-plane/api/inference';
import { readBody } from '../../http/read-body';
import { imageContentType, isMultipart, readMultipart, type UploadedFile } from '../../http/multipart';
import { requestBudgetOf } from '../../http/request-budget';

/** A media request's fields (JSON body or multipart form) and its files. */
export interface MediaBody {
  fields: FieldReader;
  files: Map<string, UploadedFile[]>;
}

/**
 * A media request's params, prompts and webhook_url are stored (jsonb and text columns), so a
 * NUL anywhere in its fields, nested values and keys included, is refused here as a 400 naming
 * the field, before anything reads them; unknown fields too, rather than tracking which are kept.
 */
export async function readMediaBody(context: Context, options: { jsonLimit: number; multipartLimit: number; multipartOnly?: boolean }): Promise<MediaBody> {
  if (isMultipart(context.req)) {
    const form = await readMultipart(context.req, options.multipartLimit, requestBudgetOf(context));
    refuseNulBytes(form.fields);
    return { fields: new FieldReader(form.fields, true), files: form.files };
  }
  if (options.multipartOnly) {
    throw new AppError('invalid_request', 'this endpoint takes multipart/form-data (the image is a file field)');
  }
  const raw = await readBody(context.req, options.jsonLimit, requestBudgetOf(context));
  const fields = parseJsonObject(raw);
  refuseNulBytes(fields);
  // Form fields are decoded from UTF-8 and cannot hold one; JSON escapes can.
  refuseLoneSurrogates(fields);
  return { fields: new FieldReader(fields, false), files: new Map() };
}

/** The one image file of a field (PNG, JPEG or WebP), or undefined when absent. */
export function imageFile(body: MediaBody, field: string): { data: Buffer; contentType: string } | undefined {
  const files = body.files.get(field);
  if (!files || files.length === 0) return undefined;
  if (files.length > 1) throw new AppError('invalid_request', `${field} takes one file; ${files.length} were sent`, { param: field });
  const contentType = imageContentType(files[0].data);
  if (!contentType) throw new AppError('invalid_request', `${field} must be a PNG, JPEG or WebP image`, { param: field });
  return { data: files[0].data, contentType };
}

/** `?async=true`; anything but true/false (or 1/0) is refused, not guessed. */
export function asyncFlag(context: Context): boolean {
  const value = context.query.async;
  if (value === undefined) return false;
  if (value === 'true' || value === '1') return true;
  if (value === 'false' || value === '0') return false;
  throw new AppError('invalid_request', `async must be true or false, got ${quoteValue(value)}`, { param: 'async' });
}

/** The Idempotency-Key header (printable ASCII, at most 255 characters), or undefined. */
export function idempotencyKey(context: Context): string | undefined {
  const key = context.get('idempotency-key');
  if (!key) return undefined;
  if (key.length > 255 || !/^[\x21-\x7e]+$/.test(key)) {
    throw new AppError('invalid_request', 'Idempotency-Key must be 1 to 255 printable ASCII characters without spaces', { param: 'Idempotency-Key' });
  }
  return key;
}
