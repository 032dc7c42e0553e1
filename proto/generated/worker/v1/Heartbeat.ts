// Original file: proto/worker/v1/worker.proto

import type { EngineHealth as _worker_v1_EngineHealth, EngineHealth__Output as _worker_v1_EngineHealth__Output } from '../../worker/v1/EngineHealth';

export interface Heartbeat {
  'inFlight'?: (number);
  'queued'?: (number);
  'engineHealth'?: (_worker_v1_EngineHealth);
  'detail'?: (string);
  'loadPercent'?: (number);
}

export interface Heartbeat__Output {
  'inFlight': (number);
  'queued': (number);
  'engineHealth': (_worker_v1_EngineHealth__Output);
  'detail': (string);
  'loadPercent': (number);
}
