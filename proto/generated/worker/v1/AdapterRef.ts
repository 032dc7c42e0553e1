// Original file: proto/worker/v1/worker.proto

import type { AdapterFormat as _worker_v1_AdapterFormat, AdapterFormat__Output as _worker_v1_AdapterFormat__Output } from '../../worker/v1/AdapterFormat';
import type { Long } from '@grpc/proto-loader';

export interface AdapterRef {
  'name'?: (string);
  'displayName'?: (string);
  'format'?: (_worker_v1_AdapterFormat);
  'source'?: (string);
  'sha256'?: (string);
  'sizeBytes'?: (number | string | Long);
  'rank'?: (number);
  'scale'?: (number | string);
}

export interface AdapterRef__Output {
  'name': (string);
  'displayName': (string);
  'format': (_worker_v1_AdapterFormat__Output);
  'source': (string);
  'sha256': (string);
  'sizeBytes': (number);
  'rank': (number);
  'scale': (number);
}
