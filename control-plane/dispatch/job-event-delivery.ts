import type { JobEvent } from '../../proto/worker/v1';
import type { Job } from './job';

/** What the carrier of a job does beside handing its events on (an agent's stream: free the slot, redispatch). */
export interface DeliveryHooks {
  /** The job ended (completed or failed): free what the carrier held for it. */
  settled?(job: Job): void;
  /** The agent refused it while draining and nothing was produced: dispatch it again elsewhere. */
  retry?(job: Job): void;
  /** The job's first chunk or output arrived. */
  firstOutput?(job: Job): void;
  /** The job completed (before its listener hears it). */
  completed?(job: Job): void;
}

const NO_HOOKS: DeliveryHooks = {};

/**
 * One agent event of a job to its listener, with the bookkeeping every carrier needs: nothing
 * after the end, only the end after a cancel, `produced` once output flowed. Used for jobs on
 * this server's agents and for jobs relayed to a peer's, so both behave the same.
 */
export function deliverJobEvent(job: Job, event: JobEvent, hooks: DeliveryHooks = NO_HOOKS): void {
  if (job.finished) return;
  if (job.canceled && event.event !== 'completed' && event.event !== 'failed') return;
  switch (event.event) {
    case 'chunk':
      if (!job.produced) hooks.firstOutput?.(job);
      job.produced = true;
      job.listener.onChunk(event.chunk!.data);
      return;
    case 'output':
      if (!job.produced) hooks.firstOutput?.(job);
      job.produced = true;
      job.listener.onOutput(event.output!.data, event.output!.contentType, event.output!.objectKey);
      return;
    case 'progress':
      job.listener.onProgress?.(event.progress!.percent, event.progress!.stage);
      return;
    case 'completed':
      hooks.completed?.(job);
      hooks.settled?.(job);
      job.finished = true;
      job.listener.onCompleted(event.completed!.usage ?? undefined, event.completed!.finishReason);
      return;
    case 'failed': {
      hooks.settled?.(job);
      const failed = event.failed!;
      if (hooks.retry && failed.code === 'agent_draining' && !job.produced && !job.canceled) {
        hooks.retry(job);
        return;
      }
      job.finished = true;
      job.listener.onFailed({
        code: failed.code, message: failed.message, engineStatus: failed.engineStatus,
        engineBody: failed.engineBody?.length ? failed.engineBody : null, usage: failed.usage ?? undefined,
      });
      return;
    }
    case 'accepted':
      job.listener.onAccepted?.(event.accepted!.queued);
      return;
    default:
      return;
  }
}
