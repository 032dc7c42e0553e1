/**
 * Whose responses a call may see: its workspace's, on the deployment it called (or, a guest's,
 * on the shared model: `shared/<model-id>`). Two scopes name more than one deployment:
 * `SHARED_SCOPE`, any of the guest's shared models (`/shared/v1/responses/{id}` names none), and
 * `WORKSPACE_SCOPE`, any of the workspace's own deployments (the workspace base URL,
 * `/v1/responses/{id}`, names none either: a client set to one base URL polls where it created).
 */
export interface ResponseScope {
  readonly workspaceId: string;
  readonly deploymentId: string;
}

export const SHARED_SCOPE = 'shared/*';
export const WORKSPACE_SCOPE = 'workspace/*';
const SHARED_PREFIX = 'shared/%';

/** The SQL test of `column` for the scope's deployment, and the value of its `parameter`. */
export function deploymentCondition(scope: ResponseScope, column: string, parameter: string): { sql: string; value: string } {
  if (scope.deploymentId === SHARED_SCOPE) return { sql: `${column} LIKE ${parameter}`, value: SHARED_PREFIX };
  if (scope.deploymentId === WORKSPACE_SCOPE) return { sql: `${column} NOT LIKE ${parameter}`, value: SHARED_PREFIX };
  return { sql: `${column} = ${parameter}`, value: scope.deploymentId };
}
