/**
 * `adapter_load_failed` (proto/PROTOCOL.md): only the jobs that need the adapter fail, the
 * replica keeps serving. `engine_status` tells the control plane whose fault it is: 422 for
 * weights that cannot serve this replica (malformed, another base model, a rank over
 * `max_lora_rank`), 502 when they could not be fetched. Messages name no path or URL: they
 * reach clients and the console, and a presigned URL is a credential.
 */
import { EngineFailure } from './engine-failure';

export type AdapterFailureKind = 'invalid' | 'fetch';

const STATUS: Record<AdapterFailureKind, number> = { invalid: 422, fetch: 502 };

export function adapterLoadFailed(kind: AdapterFailureKind, message: string, cause?: unknown): EngineFailure {
  return new EngineFailure('adapter_load_failed', message, { engineStatus: STATUS[kind], cause });
}

/** A failure of an adapter load as the job sees it: adapter_load_failed, or (anything unexpected) 422 with a safe message. */
export function asAdapterFailure(error: unknown, adapterName: string): EngineFailure {
  if (error instanceof EngineFailure && error.code === 'adapter_load_failed') return error;
  if (error instanceof EngineFailure && error.code === 'engine_unavailable') return adapterLoadFailed('fetch', `adapter ${adapterName}: the engine could not be reached to load it`, error);
  return adapterLoadFailed('invalid', `adapter ${adapterName} could not be loaded`, error);
}
