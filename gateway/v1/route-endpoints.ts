import type { Context } from 'koa';
import type { AuthenticatedKey, Deployment } from '../../control-plane/api/inference';
import { decodePathSegment } from '../http/path-segment';
import type { DeploymentEndpointName } from './endpoint-table';

/** A table endpoint's handler on a deployment's URL: the path's `{id}` or `{model}` still percent-encoded. */
export type EndpointHandler = (context: Context, deployment: Deployment, key: AuthenticatedKey, param: string | undefined) => Promise<void> | void;

/** A by-id endpoint answered from the key's workspace and the id alone (videos, request records): the same on `/v1` as on any deployment's URL. */
export type RecordHandler = (context: Context, key: AuthenticatedKey, param: string) => Promise<void> | void;

/**
 * The table endpoints one route class answers, declared beside its handlers (each route's
 * `endpoints()`), so an endpoint is added as its table row (endpoint-table.ts), its handler
 * here, and its OpenAPI operation (gateway/openapi/openapi-paths.ts): v1-router.ts only
 * gathers the routes.
 */
export interface RouteEndpoints {
  /** By endpoint name, on `/d/<slug>/v1`. */
  readonly deployment: Partial<Record<DeploymentEndpointName, EndpointHandler>>;
  /** Those also answered on the workspace base URL by the id alone (workspace-root.route.ts). */
  readonly records?: Partial<Record<DeploymentEndpointName, RecordHandler>>;
}

/** The path's `{id}`, decoded (400 on a bad escape or a NUL). */
export function idOf(param: string | undefined): string {
  return decodePathSegment(param!, 'id');
}

/** The path's `{model}` (the rest of the path: ids hold slashes), decoded. */
export function modelOf(param: string | undefined): string {
  return decodePathSegment(param!, 'model');
}

/** A JSON answer with status 200. */
export function json(context: Context, body: unknown): void {
  context.status = 200;
  context.body = body;
}
