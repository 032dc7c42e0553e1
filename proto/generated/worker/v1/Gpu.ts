// Original file: proto/worker/v1/worker.proto

import type { Long } from '@grpc/proto-loader';

export interface Gpu {
  'name'?: (string);
  'memoryBytes'?: (number | string | Long);
  'index'?: (number);
}

export interface Gpu__Output {
  'name': (string);
  'memoryBytes': (number);
  'index': (number);
}
