import { ATTR } from '../../common/tracing/span-attributes';
import { parentOf, SpanKind, SpanStatusCode, type Span, type Tracing } from '../../common/tracing/tracing';
import type { RequestRecord } from './request-record.entity';

const OPERATIONS: Record<RequestRecord['kind'], string> = {
  'image-generation': 'image_generation', 'image-edit': 'image_edit', 'video-generation': 'video_generation',
};

/**
 * The spans of an async image or video job as it runs, in its submission's trace (the record's
 * `traceparent`), on whichever server claimed it and however much later: its wait in the
 * durable queue (from submission to claim, drawn after the fact) and the job itself, whose
 * context goes to the agent in the Assign. Null when tracing is off or the submission was not traced.
 */
export function startMediaJobSpan(tracing: Tracing | null, record: RequestRecord, now: number): Span | null {
  const parent = tracing ? parentOf(record.traceparent) : undefined;
  if (!tracing || !parent) return null;
  const identity = { [ATTR.recordId]: record.id, [ATTR.workspaceId]: record.workspaceId, [ATTR.deploymentId]: record.deploymentId };
  if (!record.sync) tracing.startSpan('queue wait', SpanKind.INTERNAL, parent, identity, record.queuedAt).end(record.startedAt ?? now);
  const operation = OPERATIONS[record.kind];
  return tracing.startSpan(`${operation} ${record.modelId}`, SpanKind.CLIENT, parent, {
    ...identity, [ATTR.operationName]: operation, [ATTR.requestModel]: record.modelId, [ATTR.replicaId]: record.replicaId ?? '',
    // Media jobs bill the deployment's GPU time (the record's billed_gpu_seconds), not tokens.
    [ATTR.costBasis]: 'gpu_hours',
  });
}

/** Ends it with the record's terminal state: its status, and a failed record's code as the span's error. */
export function endMediaJobSpan(span: Span, record: RequestRecord): void {
  span.setAttribute(ATTR.outcome, record.status);
  span.setAttribute('inference.billed_gpu_seconds', record.billedGpuSeconds);
  if (record.status !== 'succeeded') {
    span.setAttribute(ATTR.errorType, record.errorCode ?? record.status);
    span.setStatus({ code: SpanStatusCode.ERROR, message: record.errorMessage ?? record.status });
  }
  span.end();
}
