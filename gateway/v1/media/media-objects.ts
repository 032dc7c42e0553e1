import type { RequestRecord, RequestStatus } from '../../../control-plane/api/records';

const unix = (date: Date | null) => (date ? Math.floor(date.getTime() / 1000) : null);

/**
 * The async request record (docs/api-contract.md#request-records). `output_urls` is present only on a succeeded record fetched
 * by id (freshly signed); list results never carry it.
 */
export function requestObject(record: RequestRecord, outputUrls?: string[] | null) {
  return {
    id: record.id,
    object: 'inference.request',
    modality: record.modality,
    status: record.status,
    output_object_key: record.outputObjectKey,
    output_bucket: record.outputBucket,
    storage_provider: record.storageProvider,
    ...(outputUrls !== undefined && record.status === 'succeeded' ? { output_urls: outputUrls } : {}),
    error_code: record.errorCode,
    error_message: record.errorMessage,
    queued_at: unix(record.queuedAt),
    started_at: unix(record.startedAt),
    completed_at: unix(record.completedAt),
  };
}

/** The async submission acknowledgement (202); a replayed Idempotency-Key reports the record's current status. */
export function acknowledgement(record: RequestRecord) {
  return { id: record.id, object: 'inference.request', status: record.status, modality: record.modality, estimated_seconds: record.estimatedSeconds };
}

const VIDEO_STATUS: Record<RequestStatus, string> = {
  queued: 'queued', running: 'in_progress', succeeded: 'completed', failed: 'failed', canceled: 'canceled',
};

export function videoStatus(record: RequestRecord): string {
  return VIDEO_STATUS[record.status];
}

/** The Video object (docs/api-contract.md#video-object; OpenAI's shape): the same record seen as a video. */
export function videoObject(record: RequestRecord) {
  const params = record.params as { size?: string; seconds?: string };
  return {
    id: record.id,
    object: 'video',
    status: videoStatus(record),
    model: record.modelId,
    progress: record.status === 'succeeded' ? 100 : record.status === 'running' ? Math.min(99, record.progress) : 0,
    created_at: unix(record.queuedAt),
    completed_at: unix(record.completedAt),
    expires_at: unix(record.outputsExpireAt),
    size: params.size ?? null,
    seconds: params.seconds ?? null,
    ...(record.status === 'failed' ? { error: { code: record.errorCode, message: record.errorMessage } } : {}),
  };
}

/** The sync image result: one item per image, a link or the bytes inline. */
export function imageResult(record: RequestRecord, urls: string[] | null, inline: Buffer[]) {
  const created = unix(record.completedAt ?? new Date());
  if (record.responseFormat === 'b64_json') return { created, data: inline.map((image) => ({ b64_json: image.toString('base64') })) };
  return { created, data: (urls ?? []).map((url) => ({ url })) };
}
