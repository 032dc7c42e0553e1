import type { Context } from 'koa';
import { AppError } from '../../../control-plane/api/errors';
import { type AuthenticatedKey, type Deployment, type InferencePort, type MediaSubmission, readImageParams } from '../../../control-plane/api/inference';
import { acknowledgement, imageResult } from './media-objects';
import { asyncFlag, idempotencyKey, imageFile, readMediaBody } from './media-body';
import { syncFailure } from './media-failure';
import type { RouteEndpoints } from '../route-endpoints';
import { traceparentOfContext } from '../../http/request-telemetry';

export interface MediaRouteOptions {
  maxBodyBytes: number;
  maxMediaBodyBytes: number;
  syncImageBudgetMs: number;
}

type Operation = 'generation' | 'edit';

/**
 * `POST /v1/images/generations` (JSON) and `POST /v1/images/edits` (multipart): sync within
 * the 30 s budget by default, or `?async=true` → 202 and a request record.
 */
export class ImagesRoute {
  constructor(private readonly inference: Pick<InferencePort, 'pipeline' | 'requests'>, private readonly options: MediaRouteOptions) {}

  endpoints(): RouteEndpoints {
    return {
      deployment: {
        'images.generations': (context, deployment, key) => this.handle(context, deployment, key, 'generation'),
        'images.edits': (context, deployment, key) => this.handle(context, deployment, key, 'edit'),
      },
    };
  }

  async handle(context: Context, deployment: Deployment, key: AuthenticatedKey, operation: Operation): Promise<void> {
    const isAsync = asyncFlag(context);
    const body = await readMediaBody(context, {
      jsonLimit: this.options.maxBodyBytes, multipartLimit: this.options.maxMediaBodyBytes, multipartOnly: operation === 'edit',
    });
    const model = this.inference.pipeline.mediaModel(deployment, body.fields.string('model'), 'image');
    const inputs: MediaSubmission['inputs'] = [];
    if (operation === 'edit') {
      if (!model.inputModalities.includes('image')) {
        throw new AppError('image_input_unsupported', `${model.id} does not accept image input; edits need an image model that does`, { param: 'model' });
      }
      const image = imageFile(body, 'image');
      if (!image) throw new AppError('invalid_request', 'image is required: the PNG, JPEG or WebP file to edit', { param: 'image' });
      inputs.push({ name: 'image', ...image });
      const mask = imageFile(body, 'mask');
      if (mask && isAsync) throw new AppError('async_mask_unsupported', 'mask is only supported on synchronous edits; drop ?async=true or the mask', { param: 'mask' });
      if (mask) inputs.push({ name: 'mask', ...mask });
    }
    const { params, delivery } = readImageParams(body.fields, model);
    const submission: MediaSubmission = {
      workspaceId: key.workspaceId, apiKeyId: key.id, deployment, model,
      kind: operation === 'edit' ? 'image-edit' : 'image-generation',
      params: { ...params }, outputCount: params.n, responseFormat: params.response_format, delivery, inputs,
      idempotencyKey: idempotencyKey(context), traceparent: traceparentOfContext(context),
    };
    const requests = this.inference.requests;
    if (isAsync) {
      const { record } = await this.inference.pipeline.submitMedia(key, submission);
      context.status = 202;
      context.body = acknowledgement(record);
      return;
    }
    const timeoutCode = operation === 'edit' ? 'image_edit_timeout' : 'image_generation_timeout';
    const budgetMs = this.options.syncImageBudgetMs;
    const outcome = await this.inference.pipeline.runMedia(key, submission, budgetMs, () => new AppError(timeoutCode,
      `the image was not ready within the ${Math.round(budgetMs / 1000)} s budget and the job was canceled; submit with ?async=true for longer jobs`));
    if (outcome.record.status !== 'succeeded') throw syncFailure(outcome.record, timeoutCode);
    const urls = params.response_format === 'url' ? await requests.outputUrls(outcome.record) : null;
    context.status = 200;
    context.body = imageResult(outcome.record, urls, outcome.inline);
  }
}
