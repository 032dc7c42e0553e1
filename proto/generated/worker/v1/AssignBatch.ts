// Original file: proto/worker/v1/worker.proto

import type { Assign as _worker_v1_Assign, Assign__Output as _worker_v1_Assign__Output } from '../../worker/v1/Assign';

export interface AssignBatch {
  'assigns'?: (_worker_v1_Assign)[];
}

export interface AssignBatch__Output {
  'assigns': (_worker_v1_Assign__Output)[];
}
