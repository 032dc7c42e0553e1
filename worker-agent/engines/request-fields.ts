import { EngineFailure } from './engine-failure';

/** What an in-process engine's answer is stamped with, read from the request once. */
export interface CompletionHeader {
  readonly kind: 'chat' | 'completion';
  /** `chatcmpl-…` / `cmpl-…`. */
  readonly id: string;
  /** Unix seconds. */
  readonly created: number;
  readonly model: string;
  readonly stream: boolean;
  /** `stream_options.include_usage`: a last chunk with usage. */
  readonly includeUsage: boolean;
}

/**
 * Reading an OpenAI request's fields in the in-process engines (CPU, llama.cpp): a bad value
 * is a 400 in OpenAI's error shape, passed through to the client like an HTTP engine's.
 */
export function invalidRequestFailure(param: string, message: string, code = 'invalid_value'): EngineFailure {
  const body = { error: { message, type: 'invalid_request_error', param, code } };
  return new EngineFailure('engine_rejected', message, { engineStatus: 400, engineBody: Buffer.from(JSON.stringify(body)) });
}

/** `source[name]` when it is an integer in [minimum, maximum]; undefined when absent or null. */
export function integerField(source: Record<string, unknown>, name: string, minimum: number, maximum = Number.MAX_SAFE_INTEGER): number | undefined {
  const value = source[name];
  if (value === undefined || value === null) return undefined;
  if (!Number.isInteger(value) || (value as number) < minimum || (value as number) > maximum) {
    throw invalidRequestFailure(name, `\`${name}\` must be an integer from ${minimum} to ${maximum}`);
  }
  return value as number;
}

/** `source[name]` when it is a number in [minimum, maximum]; undefined when absent or null. */
export function numberField(source: Record<string, unknown>, name: string, minimum: number, maximum = Number.POSITIVE_INFINITY): number | undefined {
  const value = source[name];
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'number' || !(value >= minimum && value <= maximum)) {
    const range = maximum === Number.POSITIVE_INFINITY ? `>= ${minimum}` : `from ${minimum} to ${maximum}`;
    throw invalidRequestFailure(name, `\`${name}\` must be a number ${range}`);
  }
  return value;
}
