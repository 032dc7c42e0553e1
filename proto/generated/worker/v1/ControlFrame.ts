// Original file: proto/worker/v1/worker.proto

import type { Welcome as _worker_v1_Welcome, Welcome__Output as _worker_v1_Welcome__Output } from '../../worker/v1/Welcome';
import type { Assign as _worker_v1_Assign, Assign__Output as _worker_v1_Assign__Output } from '../../worker/v1/Assign';
import type { Cancel as _worker_v1_Cancel, Cancel__Output as _worker_v1_Cancel__Output } from '../../worker/v1/Cancel';
import type { Drain as _worker_v1_Drain, Drain__Output as _worker_v1_Drain__Output } from '../../worker/v1/Drain';
import type { Reject as _worker_v1_Reject, Reject__Output as _worker_v1_Reject__Output } from '../../worker/v1/Reject';
import type { AssignBatch as _worker_v1_AssignBatch, AssignBatch__Output as _worker_v1_AssignBatch__Output } from '../../worker/v1/AssignBatch';
import type { Credit as _worker_v1_Credit, Credit__Output as _worker_v1_Credit__Output } from '../../worker/v1/Credit';

export interface ControlFrame {
  'welcome'?: (_worker_v1_Welcome | null);
  'assign'?: (_worker_v1_Assign | null);
  'cancel'?: (_worker_v1_Cancel | null);
  'drain'?: (_worker_v1_Drain | null);
  'reject'?: (_worker_v1_Reject | null);
  'assignBatch'?: (_worker_v1_AssignBatch | null);
  'credit'?: (_worker_v1_Credit | null);
  'frame'?: "welcome"|"assign"|"cancel"|"drain"|"reject"|"assignBatch"|"credit";
}

export interface ControlFrame__Output {
  'welcome'?: (_worker_v1_Welcome__Output | null);
  'assign'?: (_worker_v1_Assign__Output | null);
  'cancel'?: (_worker_v1_Cancel__Output | null);
  'drain'?: (_worker_v1_Drain__Output | null);
  'reject'?: (_worker_v1_Reject__Output | null);
  'assignBatch'?: (_worker_v1_AssignBatch__Output | null);
  'credit'?: (_worker_v1_Credit__Output | null);
  'frame'?: "welcome"|"assign"|"cancel"|"drain"|"reject"|"assignBatch"|"credit";
}
