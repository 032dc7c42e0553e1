/** Builders for the job events the agent sends, so every `Failed` carries the same fields. */
import { wireUsage, type JobEvent, type JobFailureCode, type Usage } from '../proto/worker/v1/index';
import type { EngineResult } from './engines/engine';
import { EngineFailure } from './engines/engine-failure';

export function acceptedEvent(jobId: string, queued: boolean): JobEvent {
  return { jobId, accepted: { queued } };
}

export function completedEvent(jobId: string, result: EngineResult): JobEvent {
  return { jobId, completed: { usage: wireUsage(result.usage), finishReason: result.finishReason } };
}

export function failedEvent(jobId: string, code: JobFailureCode, message: string, engineStatus = 0, engineBody: Buffer = EMPTY, usage?: Usage): JobEvent {
  return { jobId, failed: { code, message, engineStatus, engineBody, usage: wireUsage(usage) } };
}

/** An engine error becomes its protocol code; anything else is the engine's fault too. */
export function failedEventOf(jobId: string, error: unknown): JobEvent {
  if (error instanceof EngineFailure) return failedEvent(jobId, error.code, error.message, error.engineStatus, error.engineBody, error.usage);
  return failedEvent(jobId, 'engine_error', `engine call failed: ${(error as Error)?.message ?? String(error)}`);
}

const EMPTY = Buffer.alloc(0);
