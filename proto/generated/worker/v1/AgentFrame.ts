// Original file: proto/worker/v1/worker.proto

import type { Hello as _worker_v1_Hello, Hello__Output as _worker_v1_Hello__Output } from '../../worker/v1/Hello';
import type { Heartbeat as _worker_v1_Heartbeat, Heartbeat__Output as _worker_v1_Heartbeat__Output } from '../../worker/v1/Heartbeat';
import type { JobEvent as _worker_v1_JobEvent, JobEvent__Output as _worker_v1_JobEvent__Output } from '../../worker/v1/JobEvent';
import type { JobEventBatch as _worker_v1_JobEventBatch, JobEventBatch__Output as _worker_v1_JobEventBatch__Output } from '../../worker/v1/JobEventBatch';

export interface AgentFrame {
  'hello'?: (_worker_v1_Hello | null);
  'heartbeat'?: (_worker_v1_Heartbeat | null);
  'jobEvent'?: (_worker_v1_JobEvent | null);
  'jobEvents'?: (_worker_v1_JobEventBatch | null);
  'frame'?: "hello"|"heartbeat"|"jobEvent"|"jobEvents";
}

export interface AgentFrame__Output {
  'hello'?: (_worker_v1_Hello__Output | null);
  'heartbeat'?: (_worker_v1_Heartbeat__Output | null);
  'jobEvent'?: (_worker_v1_JobEvent__Output | null);
  'jobEvents'?: (_worker_v1_JobEventBatch__Output | null);
  'frame'?: "hello"|"heartbeat"|"jobEvent"|"jobEvents";
}
