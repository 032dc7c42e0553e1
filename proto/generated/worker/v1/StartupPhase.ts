// Original file: proto/worker/v1/worker.proto

import type { Long } from '@grpc/proto-loader';

export interface StartupPhase {
  'name'?: (string);
  'startedUnixMs'?: (number | string | Long);
  'durationMs'?: (number);
  'done'?: (boolean);
  'detail'?: (string);
  'bytes'?: (number | string | Long);
}

export interface StartupPhase__Output {
  'name': (string);
  'startedUnixMs': (number);
  'durationMs': (number);
  'done': (boolean);
  'detail': (string);
  'bytes': (number);
}
