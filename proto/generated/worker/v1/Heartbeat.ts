// Original file: proto/worker/v1/worker.proto

import type { EngineHealth as _worker_v1_EngineHealth, EngineHealth__Output as _worker_v1_EngineHealth__Output } from '../../worker/v1/EngineHealth';
import type { EngineSignals as _worker_v1_EngineSignals, EngineSignals__Output as _worker_v1_EngineSignals__Output } from '../../worker/v1/EngineSignals';
import type { AdapterResidency as _worker_v1_AdapterResidency, AdapterResidency__Output as _worker_v1_AdapterResidency__Output } from '../../worker/v1/AdapterResidency';
import type { StartupPhase as _worker_v1_StartupPhase, StartupPhase__Output as _worker_v1_StartupPhase__Output } from '../../worker/v1/StartupPhase';

export interface Heartbeat {
  'inFlight'?: (number);
  'queued'?: (number);
  'engineHealth'?: (_worker_v1_EngineHealth);
  'detail'?: (string);
  'loadPercent'?: (number);
  'engineSignals'?: (_worker_v1_EngineSignals | null);
  'adapters'?: (_worker_v1_AdapterResidency)[];
  'startupPhases'?: (_worker_v1_StartupPhase)[];
}

export interface Heartbeat__Output {
  'inFlight': (number);
  'queued': (number);
  'engineHealth': (_worker_v1_EngineHealth__Output);
  'detail': (string);
  'loadPercent': (number);
  'engineSignals': (_worker_v1_EngineSignals__Output | null);
  'adapters': (_worker_v1_AdapterResidency__Output)[];
  'startupPhases': (_worker_v1_StartupPhase__Output)[];
}
