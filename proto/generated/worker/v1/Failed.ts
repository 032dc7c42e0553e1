// Original file: proto/worker/v1/worker.proto

import type { Usage as _worker_v1_Usage, Usage__Output as _worker_v1_Usage__Output } from '../../worker/v1/Usage';

export interface Failed {
  'code'?: (string);
  'message'?: (string);
  'engineStatus'?: (number);
  'engineBody'?: (Buffer | Uint8Array | string);
  'usage'?: (_worker_v1_Usage | null);
}

export interface Failed__Output {
  'code': (string);
  'message': (string);
  'engineStatus': (number);
  'engineBody': (Buffer);
  'usage': (_worker_v1_Usage__Output | null);
}
