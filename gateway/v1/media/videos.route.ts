import type { Context } from 'koa';
import { AppError, quoteValue, shortened } from '../../../control-plane/api/errors';
import { type AuthenticatedKey, type Deployment, type InferencePort, type MediaSubmission, type VideoRoute, readDelivery, readVideoParams } from '../../../control-plane/api/inference';
import type { RequestRecord } from '../../../control-plane/api/records';
import type { MediaRouteOptions } from './images.route';
import { idempotencyKey, imageFile, readMediaBody } from './media-body';
import { acknowledgement, videoObject, videoStatus } from './media-objects';
import { idOf, type RouteEndpoints } from '../route-endpoints';
import { traceparentOfContext } from '../../http/request-telemetry';

/**
 * `POST /v1/videos` (OpenAI's multipart shape, the Video object back), `POST
 * /v1/videos/generations` (JSON, the async acknowledgement back), and the Video object's
 * status, content and cancel. A video id is a request id.
 */
export class VideosRoute {
  constructor(private readonly inference: Pick<InferencePort, 'pipeline' | 'requests'>, private readonly options: MediaRouteOptions) {}

  endpoints(): RouteEndpoints {
    return {
      deployment: {
        'videos.create': (context, deployment, key) => this.create(context, deployment, key, 'videos'),
        'videos.generations': (context, deployment, key) => this.create(context, deployment, key, 'videos/generations'),
        'videos.list': (context, deployment) => this.list(context, deployment),
        'videos.retrieve': (context, _deployment, key, param) => this.retrieve(context, key, idOf(param)),
        'videos.content': (context, _deployment, key, param) => this.content(context, key, idOf(param)),
        'videos.cancel': (context, _deployment, key, param) => this.cancel(context, key, idOf(param)),
      },
      records: {
        'videos.retrieve': (context, key, param) => this.retrieve(context, key, idOf(param)),
        'videos.content': (context, key, param) => this.content(context, key, idOf(param)),
        'videos.cancel': (context, key, param) => this.cancel(context, key, idOf(param)),
      },
    };
  }

  async create(context: Context, deployment: Deployment, key: AuthenticatedKey, route: VideoRoute): Promise<void> {
    const body = await readMediaBody(context, { jsonLimit: this.options.maxBodyBytes, multipartLimit: this.options.maxMediaBodyBytes });
    const model = this.inference.pipeline.mediaModel(deployment, body.fields.string('model'), 'video');
    const reference = route === 'videos' ? imageFile(body, 'input_reference') : undefined;
    if (route === 'videos/generations' && body.fields.has('input_reference')) {
      throw new AppError('invalid_request', 'POST /v1/videos/generations is text-to-video only; send input_reference to POST /v1/videos', { param: 'input_reference' });
    }
    if (reference && !model.inputModalities.includes('image')) {
      throw new AppError('image_input_unsupported', `${model.id} is text-to-video only; it cannot take input_reference`, { param: 'input_reference' });
    }
    const params = readVideoParams(body.fields, model, route, reference !== undefined);
    const submission: MediaSubmission = {
      workspaceId: key.workspaceId, apiKeyId: key.id, deployment, model, kind: 'video-generation',
      params: { ...params }, outputCount: 1, responseFormat: 'url', delivery: readDelivery(body.fields),
      inputs: reference ? [{ name: 'input_reference', ...reference }] : [], idempotencyKey: idempotencyKey(context), traceparent: traceparentOfContext(context),
    };
    const { record } = await this.inference.pipeline.submitMedia(key, submission);
    context.status = 202;
    context.body = route === 'videos' ? videoObject(record) : acknowledgement(record);
  }

  async retrieve(context: Context, key: AuthenticatedKey, id: string): Promise<void> {
    context.body = videoObject(await this.video(key, id));
  }

  async list(context: Context, deployment: Deployment): Promise<void> {
    const limit = Number(context.query.limit ?? 20);
    if (!Number.isInteger(limit) || limit < 1 || limit > 100) throw new AppError('invalid_request', 'limit must be an integer from 1 to 100', { param: 'limit' });
    // One more than asked for tells whether there are more.
    const records = await this.inference.requests.list(deployment.id, { modality: 'video' }, limit + 1);
    context.body = { object: 'list', data: records.slice(0, limit).map(videoObject), has_more: records.length > limit };
  }

  /** 302 to a fresh presigned link; 409 `video_not_ready` with the status while it is not `completed`. */
  async content(context: Context, key: AuthenticatedKey, id: string): Promise<void> {
    const variant = context.query.variant ?? 'video';
    if (variant !== 'video') throw new AppError('invalid_request', `variant must be 'video' (thumbnails and spritesheets are not produced), got ${quoteValue(variant)}`, { param: 'variant' });
    const record = await this.video(key, id);
    if (record.status !== 'succeeded') {
      throw new AppError('video_not_ready', `video ${id} is ${videoStatus(record)}, not completed${record.status === 'failed' ? `: ${record.errorMessage}` : ''}`);
    }
    const [url] = (await this.inference.requests.outputUrls(record)) ?? [];
    if (!url) throw new AppError('not_found', `the content of video ${id} has expired and was deleted`);
    context.status = 302;
    context.redirect(url);
  }

  /** 204 when queued (canceled) or already finished (no-op); 409 `video_not_cancellable` while it runs. */
  async cancel(context: Context, key: AuthenticatedKey, id: string): Promise<void> {
    await this.video(key, id);
    const { record, canceled } = await this.inference.requests.cancel(key.workspaceId, id);
    if (!canceled && record.status === 'running') {
      throw new AppError('video_not_cancellable', `video ${id} is in_progress and can no longer be canceled`);
    }
    context.status = 204;
  }

  private async video(key: AuthenticatedKey, id: string): Promise<RequestRecord> {
    const record = await this.inference.requests.get(key.workspaceId, id);
    if (record.modality !== 'video') throw new AppError('not_found', `no video '${shortened(id)}' (it is an ${record.modality} request)`, { param: 'id' });
    return record;
  }
}
