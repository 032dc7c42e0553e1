import path from 'node:path';

/** What a REST call answered. */
export interface HttpAnswer {
  status: number;
  contentType: string;
  text: string;
}

const PROJECT_ROOT = path.resolve(__dirname, '../../..');
/** A stack frame or a server path: internals a client must never see. */
const INTERNALS = [/\n\s+at [^\n]+[(:]\d+/, /\bat (?:async )?[\w.<>]+ \([^)]*:\d+:\d+\)/, /node_modules[\\/]/, /\.[jt]s:\d+:\d+/];

/**
 * Node's HTTP parser answers some requests before any route sees them (431 for a request line
 * or headers past its limit, 400 for a malformed one), with no body and the connection closed:
 * docs/api-contract.md's "the HTTP server answers 400" (Errors). Those are accepted as they are.
 */
export function refusedByHttpServer(answer: HttpAnswer): boolean {
  return answer.text === '' && [400, 414, 431].includes(answer.status);
}

/** Null when the body shows no internals, else what it showed. */
export function leakedInternals(text: string): string | null {
  if (text.includes(PROJECT_ROOT)) return `the server's path ${PROJECT_ROOT}`;
  const pattern = INTERNALS.find((candidate) => candidate.test(text));
  return pattern ? `a stack trace or source path (${pattern})` : null;
}

/**
 * The contract for any input (docs/api-contract.md#principles): never a 5xx, and every 4xx in OpenAI's error shape
 * `{error: {message, type, param, code}}`. Null when the answer keeps it, else what broke it.
 */
export function restProblem(answer: HttpAnswer, method: string): string | null {
  if (answer.status >= 500) return `HTTP ${answer.status}`;
  const leak = leakedInternals(answer.text);
  if (leak) return `the body shows ${leak}`;
  if (answer.status < 400 || method === 'HEAD' || refusedByHttpServer(answer)) return null;
  let body: unknown;
  try {
    body = JSON.parse(answer.text);
  } catch {
    return `HTTP ${answer.status} with a body that is not JSON`;
  }
  const error = (body as { error?: Record<string, unknown> } | null)?.error;
  if (!error || typeof error !== 'object') return `HTTP ${answer.status} without an error object`;
  const shaped = typeof error.message === 'string' && typeof error.type === 'string'
    && (error.param === null || typeof error.param === 'string') && (error.code === null || typeof error.code === 'string');
  return shaped ? null : `HTTP ${answer.status} with an error that is not {message, type, param, code}`;
}

interface GraphQLErrorBody {
  message?: unknown;
  extensions?: { code?: unknown; stacktrace?: unknown };
}

/** GraphQL errors (over HTTP or graphql-ws): each with a message and a code other than INTERNAL_SERVER_ERROR, no stack. */
export function graphqlErrorsProblem(errors: unknown): string | null {
  if (!Array.isArray(errors) || errors.length === 0) return 'errors is not a non-empty list';
  for (const error of errors as GraphQLErrorBody[]) {
    if (typeof error?.message !== 'string') return 'an error without a message';
    const code = error.extensions?.code;
    if (typeof code !== 'string') return `an error without extensions.code: ${error.message}`;
    if (code === 'INTERNAL_SERVER_ERROR') return `INTERNAL_SERVER_ERROR: ${error.message}`;
    if (error.extensions?.stacktrace !== undefined) return 'an error with a stacktrace';
  }
  return null;
}

/**
 * `/graphql` over HTTP: under 500, and a 4xx is either GraphQL's `{errors}` (with codes) or,
 * for a body that never became a GraphQL request (not JSON, too large), the OpenAI error shape
 * the rest of the gateway uses. A 200 may carry errors too; they are held to the same rule.
 */
export function graphqlHttpProblem(answer: HttpAnswer, method: string): string | null {
  if (answer.status >= 500) return `HTTP ${answer.status}`;
  const leak = leakedInternals(answer.text);
  if (leak) return `the body shows ${leak}`;
  if (method === 'HEAD' || method === 'OPTIONS' || refusedByHttpServer(answer)) return null;
  let body: { errors?: unknown; error?: unknown; data?: unknown } | null;
  try {
    body = JSON.parse(answer.text) as typeof body;
  } catch {
    return `HTTP ${answer.status} with a body that is not JSON`;
  }
  if (body && typeof body === 'object' && 'errors' in body) return graphqlErrorsProblem(body.errors);
  if (answer.status >= 400) {
    if (body && typeof body === 'object' && 'error' in body) return restProblem(answer, method);
    return `HTTP ${answer.status} without errors`;
  }
  return null;
}
