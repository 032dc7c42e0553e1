// Original file: proto/worker/v1/worker.proto

import type { Accepted as _worker_v1_Accepted, Accepted__Output as _worker_v1_Accepted__Output } from '../../worker/v1/Accepted';
import type { Chunk as _worker_v1_Chunk, Chunk__Output as _worker_v1_Chunk__Output } from '../../worker/v1/Chunk';
import type { Progress as _worker_v1_Progress, Progress__Output as _worker_v1_Progress__Output } from '../../worker/v1/Progress';
import type { Output as _worker_v1_Output, Output__Output as _worker_v1_Output__Output } from '../../worker/v1/Output';
import type { Completed as _worker_v1_Completed, Completed__Output as _worker_v1_Completed__Output } from '../../worker/v1/Completed';
import type { Failed as _worker_v1_Failed, Failed__Output as _worker_v1_Failed__Output } from '../../worker/v1/Failed';

export interface JobEvent {
  'jobId'?: (string);
  'accepted'?: (_worker_v1_Accepted | null);
  'chunk'?: (_worker_v1_Chunk | null);
  'progress'?: (_worker_v1_Progress | null);
  'output'?: (_worker_v1_Output | null);
  'completed'?: (_worker_v1_Completed | null);
  'failed'?: (_worker_v1_Failed | null);
  'event'?: "accepted"|"chunk"|"progress"|"output"|"completed"|"failed";
}

export interface JobEvent__Output {
  'jobId': (string);
  'accepted'?: (_worker_v1_Accepted__Output | null);
  'chunk'?: (_worker_v1_Chunk__Output | null);
  'progress'?: (_worker_v1_Progress__Output | null);
  'output'?: (_worker_v1_Output__Output | null);
  'completed'?: (_worker_v1_Completed__Output | null);
  'failed'?: (_worker_v1_Failed__Output | null);
  'event'?: "accepted"|"chunk"|"progress"|"output"|"completed"|"failed";
}
