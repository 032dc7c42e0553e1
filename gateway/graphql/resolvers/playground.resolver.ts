import type { Logger } from 'pino';
import { Arg, Ctx, Mutation, Resolver, Root, Subscription } from 'type-graphql';
import type { AdminPort } from '../../../control-plane/api/admin';
import { AppError, shortened } from '../../../control-plane/api/errors';
import { FieldReader, readImageParams, servedEndpoints, type AuthenticatedKey, type MediaSubmission } from '../../../control-plane/api/inference';
import { RequestIds } from '../../http/request-id';
import { syncFailure } from '../../v1/media/media-failure';
import { workspaceOf, type GraphQLContext } from '../graphql-context';
import { playgroundChatBody } from '../playground/playground-body';
import { PlaygroundChatStream, type PlaygroundChatEvent } from '../playground/playground-chat-stream';
import { servedBySubscriptionHub, type StreamRoute } from '../subscription-routes';
import {
  PlaygroundChatEventType, PlaygroundChatInput, PlaygroundImageInput, PlaygroundImageType,
} from '../types/playground.type';

/** The gateway's settings a playground request keeps to, as `/v1` does. */
export interface PlaygroundOptions {
  /** A chat answer not finished by then is canceled (`REQUEST_TIMEOUT_MS`). */
  requestTimeoutMs: number;
  /** Chunk bytes the agent may send ahead of the subscriber (`STREAM_BUFFER_BYTES`). */
  streamBufferBytes: number;
  /** A sync image not ready by then is canceled (`SYNC_IMAGE_BUDGET_MS`). */
  syncImageBudgetMs: number;
}

/**
 * The console's playground: a chat (streamed, with tools and structured output) or an image on
 * one of the workspace's deployments, run as one of its API keys chosen by id. No side door:
 * the request goes through the same InferencePipeline as `/v1` (admission with the key's credit,
 * RPM and TPD, placement, the WorkTicket that meters, bills and records it), so it is billed,
 * rate-limited and logged like any call with that key; a revoked key is refused. The signed-in
 * key only picks which of the workspace's keys to use.
 */
@Resolver()
export class PlaygroundResolver {
  private readonly requestIds = new RequestIds();

  constructor(
    private readonly admin: Pick<AdminPort, 'apiKeys' | 'deployments' | 'pipeline' | 'requests'>,
    private readonly options: PlaygroundOptions,
    private readonly logger: Logger,
  ) {}

  @Subscription(() => PlaygroundChatEventType, {
    description: 'Runs a chat request on a deployment as one of the workspace\'s keys (the console\'s playground) and streams its answer: '
      + 'text pieces, then the finish reason, tool calls and tokens. Bad input is refused before anything runs (BAD_USER_INPUT naming the field); '
      + 'admission refuses as /v1 does (RATE_LIMITED, INSUFFICIENT_QUOTA, UNAVAILABLE)',
    subscribe: servedBySubscriptionHub,
  })
  playgroundChat(@Root() event: PlaygroundChatEvent, @Arg('input') _input: PlaygroundChatInput): PlaygroundChatEventType {
    return event;
  }

  /** The stream route of `playgroundChat` (subscription-routes.ts): checked and admitted before the subscription starts. */
  readonly chatStream: StreamRoute = {
    stream: async (args, caller) => await this.startChat(args.input as PlaygroundChatInput, caller),
  };

  @Mutation(() => PlaygroundImageType, {
    description: 'Generates an image on an image deployment as one of the workspace\'s keys (the console\'s playground), waiting as a sync '
      + '/v1/images/generations call does; billed and recorded like one',
  })
  async playgroundImage(@Arg('input') input: PlaygroundImageInput, @Ctx() context: GraphQLContext): Promise<PlaygroundImageType> {
    const { key, deployment } = await this.target(context, input.apiKeyId, input.deploymentId);
    const { pipeline, requests } = this.admin;
    const model = pipeline.mediaModel(deployment, deployment.modelId, 'image');
    const { params, delivery } = readImageParams(new FieldReader({ prompt: input.prompt, size: input.size ?? 'auto', response_format: 'url' }, false), model);
    const submission: MediaSubmission = {
      workspaceId: key.workspaceId, apiKeyId: key.id, deployment, model, kind: 'image-generation',
      params: { ...params }, outputCount: params.n, responseFormat: 'url', delivery, inputs: [],
    };
    const budgetMs = this.options.syncImageBudgetMs;
    const outcome = await pipeline.runMedia(key, submission, budgetMs, () => new AppError('image_generation_timeout',
      `the image was not ready within the ${Math.round(budgetMs / 1000)} s budget and the job was canceled`));
    if (outcome.record.status !== 'succeeded') throw syncFailure(outcome.record, 'image_generation_timeout');
    return { requestId: outcome.record.id, urls: (await requests.outputUrls(outcome.record)) ?? [] };
  }

  private async startChat(input: PlaygroundChatInput, caller: GraphQLContext): Promise<PlaygroundChatStream> {
    // The input first: a bad one costs no lookup.
    const { body, fields } = playgroundChatBody(input);
    const { key, deployment } = await this.target(caller, input.apiKeyId, input.deploymentId);
    const requestId = this.requestIds.next();
    const { pipeline } = this.admin;
    const ticket = await pipeline.admitText(key, deployment, {
      endpoint: 'chat.completions', body, fields, model: typeof fields.model === 'string' ? fields.model : undefined, stream: true, includeUsage: true,
      deadlineUnixMs: Date.now() + this.options.requestTimeoutMs, streamWindowBytes: this.options.streamBufferBytes, servedBy: servedEndpoints,
      trace: { requestId },
    });
    const stream = new PlaygroundChatStream(requestId, this.options.requestTimeoutMs);
    const startedAt = performance.now();
    pipeline.run(ticket, stream).then((summary) => this.logger.info({
      requestId, route: 'graphql.playgroundChat', deployment: deployment.id, apiKeyId: key.id, status: 200,
      durationMs: Math.round(performance.now() - startedAt), promptTokens: summary.usage?.promptTokens, completionTokens: summary.usage?.completionTokens,
    }, 'request'), (error: unknown) => {
      // Failed before its first piece: the subscriber gets the error (it was not told anything yet).
      stream.fail(error instanceof AppError ? error : new AppError('internal_error', 'the request failed', { cause: error }));
      this.logger.info({ requestId, route: 'graphql.playgroundChat', deployment: deployment.id, apiKeyId: key.id, error: (error as Error).message }, 'request');
    });
    return stream;
  }

  /** The key (of the caller's workspace, not revoked) and deployment (the caller's) a playground request runs as and on. */
  private async target(caller: GraphQLContext, apiKeyId: string, deploymentId: string): Promise<{ key: AuthenticatedKey; deployment: Awaited<ReturnType<AdminPort['deployments']['get']>> }> {
    const workspaceId = workspaceOf(caller);
    const key = await this.admin.apiKeys.byId(apiKeyId);
    // Another workspace's key is refused as an unknown one: its id tells nothing.
    if (!key || key.workspaceId !== workspaceId) {
      throw new AppError('not_found', `no API key '${shortened(apiKeyId)}' in this workspace that is not revoked`, { param: 'apiKeyId' });
    }
    const deployment = await this.admin.deployments.get(workspaceId, deploymentId);
    return { key, deployment };
  }
}
