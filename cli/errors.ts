/**
 * The two kinds of failure the CLI tells apart by exit code (docs/cli.md#exit-codes): what the
 * server answered (1: its code and message are printed) and what the caller typed (2, as
 * commander's own usage errors).
 */
export const EXIT_OK = 0;
export const EXIT_SERVER_ERROR = 1;
export const EXIT_USAGE = 2;

/** An error the server returned: a GraphQL error's `extensions.code`, or an OpenAI error body's `code`/`type`, or an HTTP status. */
export class ServerError extends Error {
  constructor(readonly code: string, message: string, readonly param?: string, readonly status?: number) {
    super(message);
    this.name = 'ServerError';
  }
}

/** The call could not be made as asked (a missing token, a file that cannot be read): exit 2. */
export class UsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UsageError';
  }
}

/** One line for stderr: `error: CODE: message (param: x)`. */
export function renderServerError(error: ServerError): string {
  return `error: ${error.code}: ${error.message}${error.param ? ` (param: ${error.param})` : ''}`;
}
