import type { IncomingMessage } from 'node:http';
import Busboy, { type BusboyInstance } from '@fastify/busboy';
import { AppError } from '../../control-plane/api/errors';
import { cutShort, type BodyMemory } from './read-body';
import { takeRoutedForm } from './routed-body';

import type { MultipartForm } from './multipart-form';

export type { MultipartForm, UploadedFile } from './multipart-form';

const MAX_FIELDS = 64;
const MAX_FIELD_BYTES = 64 * 1024;

export function isMultipart(request: IncomingMessage): boolean {
  return /^multipart\/form-data/i.test(request.headers['content-type'] ?? '');
}

/**
 * Reads a multipart/form-data body (batch files, image edits, videos) into memory up to `limit`
 * bytes in all, holding the bytes received so far in `memory` (the request's tenant budget,
 * request-budget.ts) as they arrive: refused there (429, 503) when they no longer fit, the rest
 * unread. A declared length is checked against the limit, never held: an upload that declared
 * 100 MB and sent nothing held the whole upload memory of the server for as long as it liked.
 * Fields arrive as strings; files by field name (`image` and `image[]` are the same field).
 */
export function readMultipart(request: IncomingMessage, limit: number, memory: BodyMemory): Promise<MultipartForm> {
  const routed = takeRoutedForm(request);
  if (routed) return Promise.resolve(routed);
  const declared = Number(request.headers['content-length']);
  if (declared > limit) return Promise.reject(tooLarge(limit));
  return new Promise((resolve, reject) => {
    let parser: BusboyInstance;
    try {
      parser = new Busboy({
        headers: request.headers as IncomingMessage['headers'] & { 'content-type': string },
        limits: { fileSize: limit, fields: MAX_FIELDS, fieldSize: MAX_FIELD_BYTES, files: 8 },
      });
    } catch (error) {
      reject(new AppError('invalid_request', `malformed multipart/form-data request: ${(error as Error).message}`, { cause: error }));
      return;
    }
    const form: MultipartForm = { fields: {}, files: new Map() };
    let total = 0;
    let failed = false;
    const fail = (error: AppError): void => {
      if (failed) return;
      failed = true;
      request.unpipe(parser);
      request.resume();
      reject(error);
    };
    // A part without `name=` reaches these handlers with no name; throwing here would escape
    // busboy's stream as an uncaught exception and stop the server.
    const unnamed = () => new AppError('invalid_request', 'every form part needs a name (Content-Disposition: form-data; name="…")');
    parser.on('field', (name, value, _nameTruncated, valueTruncated) => {
      if (typeof name !== 'string') return fail(unnamed());
      if (valueTruncated) return fail(new AppError('invalid_request', `form field ${name} is longer than ${MAX_FIELD_BYTES} bytes`, { param: name }));
      total += value.length;
      const refusal = memory.body(total);
      if (refusal) return fail(refusal);
      form.fields[name.replace(/\[\]$/, '')] = value;
    });
    parser.on('file', (name, stream, filename, _encoding, mimeType) => {
      if (typeof name !== 'string') {
        stream.resume();
        return fail(unnamed());
      }
      const chunks: Buffer[] = [];
      stream.on('data', (chunk: Buffer) => {
        total += chunk.length;
        const refusal = total > limit ? tooLarge(limit) : memory.body(total);
        if (refusal) return fail(refusal);
        chunks.push(chunk);
      });
      stream.on('limit', () => fail(tooLarge(limit)));
      // A form that ends inside a file makes busboy destroy the file's stream with the parse
      // error; unheard, it would be an uncaught exception and stop the server. The parser's
      // own 'error' (below) answers the request.
      stream.on('error', () => {});
      stream.on('end', () => {
        const field = name.replace(/\[\]$/, '');
        const files = form.files.get(field) ?? [];
        files.push({ data: Buffer.concat(chunks), filename: filename || field, contentType: mimeType || 'application/octet-stream' });
        form.files.set(field, files);
      });
    });
    parser.on('fieldsLimit', () => fail(new AppError('invalid_request', `a form may have at most ${MAX_FIELDS} fields`)));
    parser.on('filesLimit', () => fail(new AppError('invalid_request', 'a form may carry at most 8 files')));
    parser.on('error', (error: Error) => fail(new AppError('invalid_request', `malformed multipart/form-data request: ${error.message}`, { cause: error })));
    parser.on('finish', () => {
      if (!failed) resolve(form);
    });
    // pipe() does not pass on the request's errors: without this, a form cut short by the
    // client left the promise (and everything it holds) pending for good.
    request.once('error', (error) => fail(cutShort(error)));
    request.pipe(parser);
  });
}

function tooLarge(limit: number): AppError {
  return new AppError('body_too_large', `request body is larger than the limit of ${limit} bytes`);
}

/** PNG, JPEG or WebP, by their magic bytes: the image formats media engines take. */
export function imageContentType(data: Buffer): string | null {
  if (data.length >= 8 && data.subarray(0, 8).equals(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]))) return 'image/png';
  if (data.length >= 3 && data[0] === 0xff && data[1] === 0xd8 && data[2] === 0xff) return 'image/jpeg';
  if (data.length >= 12 && data.toString('latin1', 0, 4) === 'RIFF' && data.toString('latin1', 8, 12) === 'WEBP') return 'image/webp';
  return null;
}
