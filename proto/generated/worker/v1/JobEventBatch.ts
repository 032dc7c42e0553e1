// Original file: proto/worker/v1/worker.proto

import type { JobEvent as _worker_v1_JobEvent, JobEvent__Output as _worker_v1_JobEvent__Output } from '../../worker/v1/JobEvent';

export interface JobEventBatch {
  'events'?: (_worker_v1_JobEvent)[];
}

export interface JobEventBatch__Output {
  'events': (_worker_v1_JobEvent__Output)[];
}
