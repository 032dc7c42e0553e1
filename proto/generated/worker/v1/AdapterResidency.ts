// Original file: proto/worker/v1/worker.proto

import type { AdapterState as _worker_v1_AdapterState, AdapterState__Output as _worker_v1_AdapterState__Output } from '../../worker/v1/AdapterState';
import type { Long } from '@grpc/proto-loader';

export interface AdapterResidency {
  'name'?: (string);
  'state'?: (_worker_v1_AdapterState);
  'loadMs'?: (number);
  'error'?: (string);
  'lastUsedUnixMs'?: (number | string | Long);
}

export interface AdapterResidency__Output {
  'name': (string);
  'state': (_worker_v1_AdapterState__Output);
  'loadMs': (number);
  'error': (string);
  'lastUsedUnixMs': (number);
}
