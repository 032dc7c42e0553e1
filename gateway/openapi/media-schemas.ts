import { REQUEST_STATUSES } from '../../control-plane/api/records';
import {
  array, boolean, closedObject, constant, integer, nullable, number, oneOfStrings, openObject, ref, string, unixSeconds, type JsonObject,
} from './schema-helpers';

const BINARY = { type: 'string', contentMediaType: 'application/octet-stream', description: 'a PNG, JPEG or WebP file' };
const MODALITY = oneOfStrings(['image', 'video']);
const VIDEO_STATUSES = ['queued', 'in_progress', 'completed', 'failed', 'canceled'];

/** The extensions images and videos share (docs/api-contract.md#images, #output-destinations, #webhooks). */
const MEDIA_EXTENSIONS: Record<string, JsonObject> = {
  model: string('the deployment\'s model'),
  negative_prompt: string(), seed: integer(), steps: integer(),
  storage_credential_id: integer('write outputs to a verified customer bucket'),
  webhook_url: string('public HTTPS only, else 422 `invalid_webhook_url`'),
};

/** Multipart fields arrive as text: numbers there are decimal strings. */
const FORM_NUMBER = { anyOf: [number(), string()] };

export const MEDIA_SCHEMAS: Record<string, JsonObject> = {
  ImageGenerationRequest: openObject({
    ...MEDIA_EXTENSIONS, prompt: string(), n: integer('images per call (default 1)'),
    size: string('one of the model\'s sizes, or `auto` (default 1024x1024)'), response_format: oneOfStrings(['url', 'b64_json']),
    guidance_scale: number(),
  }, ['model', 'prompt'], 'Unknown standard fields (`style`, `quality`, `user`, …) are ignored.'),
  ImageEditRequest: openObject({
    ...MEDIA_EXTENSIONS, image: BINARY, mask: { ...BINARY, description: 'synchronous edits only' }, prompt: string(),
    n: FORM_NUMBER, size: string(), response_format: oneOfStrings(['url', 'b64_json']), guidance_scale: FORM_NUMBER,
    seed: FORM_NUMBER, steps: FORM_NUMBER, storage_credential_id: FORM_NUMBER,
  }, ['model', 'image', 'prompt']),
  ImagesResponse: closedObject({
    created: integer(),
    data: array({ anyOf: [closedObject({ url: string('a signed link, valid ~1 h (customer buckets ~7 days)') }), closedObject({ b64_json: string() })] }),
  }),
  RequestAcknowledgement: closedObject({
    id: string(), object: constant('inference.request'), status: oneOfStrings(REQUEST_STATUSES), modality: MODALITY,
    estimated_seconds: nullable(number()),
  }, undefined, 'The answer (202) to an asynchronous submission; a replayed Idempotency-Key reports the record\'s current status.'),
  RequestRecord: closedObject({
    id: string(), object: constant('inference.request'), modality: MODALITY, status: oneOfStrings(REQUEST_STATUSES),
    output_object_key: nullable(string()), output_bucket: nullable(string()), storage_provider: nullable(string()),
    output_urls: nullable(array(string(), 'fresh links, one per file; only on a succeeded record read by id')),
    error_code: nullable(string()), error_message: nullable(string()),
    queued_at: nullable(unixSeconds('')), started_at: nullable(unixSeconds('')), completed_at: nullable(unixSeconds('')),
  }, ['id', 'object', 'modality', 'status', 'output_object_key', 'output_bucket', 'storage_provider', 'error_code', 'error_message',
    'queued_at', 'started_at', 'completed_at']),
  RequestList: closedObject({ object: constant('list'), data: array(ref('RequestRecord'), 'newest first; never `output_urls`') }),
  VideoCreateRequest: openObject({
    ...MEDIA_EXTENSIONS, prompt: string(), seconds: FORM_NUMBER, size: string(), fps: FORM_NUMBER,
    seed: FORM_NUMBER, steps: FORM_NUMBER, storage_credential_id: FORM_NUMBER,
    input_reference: { ...BINARY, description: 'image-to-video: the first frame' },
  }, ['model', 'prompt', 'seconds', 'size']),
  VideoGenerationRequest: openObject({
    ...MEDIA_EXTENSIONS, prompt: string(), resolution: string('default 720x1280'), duration: number('seconds, default 5.0'), fps: integer('default 24'),
  }, ['model', 'prompt'], 'Text-to-video only: `input_reference` is refused here.'),
  Video: closedObject({
    id: string(), object: constant('video'), status: oneOfStrings(VIDEO_STATUSES), model: string(),
    progress: integer('0-99 while in progress, 100 when completed'), created_at: nullable(integer()), completed_at: nullable(integer()),
    expires_at: nullable(integer()), size: nullable(string()), seconds: nullable(string()),
    error: closedObject({ code: nullable(string()), message: nullable(string()) }),
  }, ['id', 'object', 'status', 'model', 'progress', 'created_at', 'completed_at', 'expires_at', 'size', 'seconds'],
  'docs/api-contract.md#video-object; `error` only when failed.'),
  VideoList: closedObject({ object: constant('list'), data: array(ref('Video')), has_more: boolean() }),
};
