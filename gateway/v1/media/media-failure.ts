import { AppError, type AppErrorCode } from '../../../control-plane/api/errors';
import type { RequestRecord } from '../../../control-plane/api/records';

const SYNC_ERRORS: Record<string, AppErrorCode> = {
  storage_upload_failed: 'storage_upload_failed',
  invalid_request: 'invalid_request',
};

/**
 * A failed sync image call as the HTTP error docs/api-contract.md#image-errors lists: `storage_upload_failed` 502,
 * engine refusals 400, a job that ran out of time 504, and GPU failures (memory most often)
 * `upstream_error` 502, with the record's own code in the message.
 */
export function syncFailure(record: RequestRecord, timeoutCode: 'image_generation_timeout' | 'image_edit_timeout'): AppError {
  const code = record.errorCode ?? 'upstream_error';
  const message = `${record.errorMessage ?? 'the job failed'} (request ${record.id}, error_code ${code})`;
  if (code === 'model_timeout') return new AppError(timeoutCode, message);
  return new AppError(SYNC_ERRORS[code] ?? 'upstream_error', message);
}
