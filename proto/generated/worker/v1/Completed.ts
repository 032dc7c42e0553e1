// Original file: proto/worker/v1/worker.proto

import type { Usage as _worker_v1_Usage, Usage__Output as _worker_v1_Usage__Output } from '../../worker/v1/Usage';

export interface Completed {
  'usage'?: (_worker_v1_Usage | null);
  'finishReason'?: (string);
}

export interface Completed__Output {
  'usage': (_worker_v1_Usage__Output | null);
  'finishReason': (string);
}
