import type { Batch, BatchFile, CursorPage } from '../../../control-plane/api/records';

/** Unix seconds, as OpenAI's objects give times; null stays null. */
function seconds(date: Date | null): number | null {
  return date === null ? null : Math.floor(date.getTime() / 1000);
}

/** OpenAI's File object. Every file is whole once stored, so always `processed`; files are kept until deleted. */
export function fileObject(file: BatchFile) {
  return {
    id: file.id, object: 'file' as const, bytes: file.bytes, created_at: seconds(file.createdAt), filename: file.filename,
    purpose: file.purpose, status: 'processed' as const, expires_at: null, status_details: null,
  };
}

/** OpenAI's Batch object, every field present (null when not reached or not there). */
export function batchObject(batch: Batch) {
  return {
    id: batch.id,
    object: 'batch' as const,
    endpoint: batch.endpoint,
    model: batch.model,
    errors: batch.errors ? { object: 'list' as const, data: batch.errors } : null,
    input_file_id: batch.inputFileId,
    completion_window: batch.completionWindow,
    status: batch.status,
    output_file_id: batch.outputFileId,
    error_file_id: batch.errorFileId,
    created_at: seconds(batch.createdAt),
    in_progress_at: seconds(batch.inProgressAt),
    expires_at: seconds(batch.expiresAt),
    finalizing_at: seconds(batch.finalizingAt),
    completed_at: seconds(batch.completedAt),
    failed_at: seconds(batch.failedAt),
    expired_at: seconds(batch.expiredAt),
    cancelling_at: seconds(batch.cancellingAt),
    cancelled_at: seconds(batch.cancelledAt),
    request_counts: { total: batch.totalCount, completed: batch.completedCount, failed: batch.failedCount },
    usage: {
      input_tokens: batch.inputTokens, input_tokens_details: { cached_tokens: batch.cachedTokens },
      output_tokens: batch.outputTokens, output_tokens_details: { reasoning_tokens: 0 }, total_tokens: batch.totalTokens,
    },
    metadata: batch.metadata,
  };
}

/** OpenAI's cursor list: `first_id`, `last_id` and `has_more` beside the items. */
export function listObject<T extends { id: string }, R>(page: CursorPage<T>, render: (item: T) => R) {
  return {
    object: 'list' as const,
    data: page.data.map(render),
    first_id: page.data[0]?.id ?? null,
    last_id: page.data[page.data.length - 1]?.id ?? null,
    has_more: page.hasMore,
  };
}
