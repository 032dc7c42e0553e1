import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from 'pino';
import { AppError } from '../../control-plane/errors/app-error';
import type { ControlPlane } from '../../control-plane/main';
import { renderError } from '../errors/openai-error';
import { resolveDeploymentEndpoint } from './deployment-endpoint';
import { TextCompletionRoute, type TextRouteOptions } from './text-completion.route';

const TEXT_PATH = /^\/d\/([a-z0-9-]{1,64})\/v1\/(chat\/completions|completions)(?:\?|$)/;

/**
 * `POST /d/<slug>/v1/chat/completions` and `/completions` answered on node:http directly, in
 * front of Koa: the hot path builds no Koa context, runs no middleware chain and wraps no
 * response (Koa's share was ~30 µs of the gateway's ~150 µs per request; PERF-NOTES.md).
 * Returns false for every other request, which Koa then serves.
 */
export function textFastLane(controlPlane: ControlPlane, options: TextRouteOptions, logger: Logger) {
  const text = new TextCompletionRoute(controlPlane, options);

  const serve = async (request: IncomingMessage, response: ServerResponse, slug: string, endpoint: string): Promise<void> => {
    const { key, deployment } = await resolveDeploymentEndpoint(controlPlane, slug, request.headers.authorization);
    await text.handle(request, response, deployment, key, endpoint === 'completions' ? 'completions' : 'chat.completions');
  };

  const fail = (response: ServerResponse, error: unknown): void => {
    if (!(error instanceof AppError)) logger.error({ err: error }, 'unhandled error');
    if (response.headersSent || response.writableEnded) {
      response.end();
      return;
    }
    const rendered = renderError(error);
    response.writeHead(rendered.status, { ...rendered.headers, 'content-length': String(rendered.body.length) });
    response.end(rendered.body);
  };

  return (request: IncomingMessage, response: ServerResponse): boolean => {
    if (request.method !== 'POST') return false;
    const match = TEXT_PATH.exec(request.url ?? '');
    if (!match) return false;
    serve(request, response, match[1], match[2]).catch((error) => fail(response, error));
    return true;
  };
}
