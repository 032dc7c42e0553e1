import { ServerError } from './errors';

/** Where the CLI talks to and with which bearer token (a workspace API key or the operator token). */
export interface Connection {
  /** The server's base URL, without a trailing slash: http://127.0.0.1:8080. */
  url: string;
  token: string;
}

interface GraphQLErrorBody {
  message?: string;
  extensions?: { code?: string; param?: string };
}

/**
 * GraphQL over HTTP (POST /graphql) with the bearer token. Returns `data` when the server sent
 * no error; otherwise throws the first error as a ServerError with its `extensions.code`. The
 * server refuses some calls before GraphQL runs (a body too large for an anonymous caller, a
 * database outage) with an OpenAI-style body or a bare status: those become ServerErrors too.
 */
export async function graphql<T>(connection: Connection, query: string, variables: Record<string, unknown> = {}): Promise<T> {
  const response = await send(`${connection.url}/graphql`, {
    method: 'POST',
    headers: { authorization: `Bearer ${connection.token}`, 'content-type': 'application/json', accept: 'application/json' },
    body: JSON.stringify({ query, variables }),
  });
  const body = await readJson(response);
  const errors = (body as { errors?: GraphQLErrorBody[] } | undefined)?.errors;
  if (Array.isArray(errors) && errors.length > 0) {
    const [first] = errors;
    throw new ServerError(first.extensions?.code ?? `HTTP_${response.status}`, first.message ?? 'unknown error', first.extensions?.param, response.status);
  }
  const data = (body as { data?: T } | undefined)?.data;
  if (!response.ok || data === undefined || data === null) throw httpError(response, body);
  return data;
}

/** A REST call on the OpenAI-compatible surface (/d/<slug>/v1/…); OpenAI error bodies become ServerErrors. */
export async function rest<T>(connection: Connection, path: string, init: { method: string; json?: unknown; form?: FormData }): Promise<T> {
  const headers: Record<string, string> = { authorization: `Bearer ${connection.token}`, accept: 'application/json' };
  let body: string | FormData | undefined;
  if (init.form) body = init.form;
  else if (init.json !== undefined) {
    body = JSON.stringify(init.json);
    headers['content-type'] = 'application/json';
  }
  const response = await send(`${connection.url}${path}`, { method: init.method, headers, body });
  const parsed = await readJson(response);
  if (!response.ok) throw httpError(response, parsed);
  return parsed as T;
}

async function send(url: string, init: RequestInit): Promise<Response> {
  try {
    return await fetch(url, init);
  } catch (error) {
    const cause = (error as { cause?: { code?: string; message?: string } }).cause;
    throw new ServerError(cause?.code ?? 'CONNECTION_FAILED', `cannot reach ${new URL(url).origin}: ${cause?.message ?? (error as Error).message}`);
  }
}

async function readJson(response: Response): Promise<unknown> {
  const text = await response.text();
  if (text.length === 0) return undefined;
  try {
    return JSON.parse(text);
  } catch {
    return { error: { message: text.slice(0, 500) } };
  }
}

/** An OpenAI error body ({ error: { message, code, type, param } }) or a bare status. */
function httpError(response: Response, body: unknown): ServerError {
  const error = (body as { error?: { message?: string; code?: string | null; type?: string; param?: string | null } } | undefined)?.error;
  const code = error?.code ?? error?.type ?? `HTTP_${response.status}`;
  return new ServerError(code, error?.message ?? `${response.status} ${response.statusText}`, error?.param ?? undefined, response.status);
}
