// Original file: proto/cluster/v1/cluster.proto

import type { JobEvent as _worker_v1_JobEvent, JobEvent__Output as _worker_v1_JobEvent__Output } from '../../worker/v1/JobEvent';

export interface RelayEvent {
  'relayJobId'?: (string);
  'replicaId'?: (string);
  'jobEvent'?: (_worker_v1_JobEvent | null);
  'event'?: "replicaId"|"jobEvent";
}

export interface RelayEvent__Output {
  'relayJobId': (string);
  'replicaId'?: (string);
  'jobEvent'?: (_worker_v1_JobEvent__Output | null);
  'event'?: "replicaId"|"jobEvent";
}
