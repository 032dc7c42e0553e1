import type { JobFailureCode, Usage } from '../../proto/worker/v1/index';

export interface EngineFailureDetails {
  /** The engine's HTTP status when it answered with an error. */
  readonly engineStatus?: number;
  /** The engine's error body, passed on to the client for 4xx answers. */
  readonly engineBody?: Buffer;
  readonly usage?: Usage;
  readonly cause?: unknown;
}

/** Attaches partial usage to a failure (keeping usage an adapter already set). */
export function withUsage(error: unknown, usage: Usage): unknown {
  if (error instanceof EngineFailure && !error.usage) error.usage = usage;
  return error;
}

/** A job failure with a `Failed.code` from the closed vocabulary of PROTOCOL.md. */
export class EngineFailure extends Error {
  readonly engineStatus?: number;
  readonly engineBody?: Buffer;
  /** Tokens consumed before the failure, set by the engine adapter that saw them. */
  usage?: Usage;

  constructor(readonly code: JobFailureCode, message: string, details: EngineFailureDetails = {}) {
    super(message, details.cause === undefined ? undefined : { cause: details.cause });
    this.name = 'EngineFailure';
    this.engineStatus = details.engineStatus;
    this.engineBody = details.engineBody;
    this.usage = details.usage;
  }
}
