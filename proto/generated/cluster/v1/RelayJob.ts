// Original file: proto/cluster/v1/cluster.proto

import type { Assign as _worker_v1_Assign, Assign__Output as _worker_v1_Assign__Output } from '../../worker/v1/Assign';

export interface RelayJob {
  'deploymentId'?: (string);
  'assign'?: (_worker_v1_Assign | null);
  'replicaId'?: (string);
}

export interface RelayJob__Output {
  'deploymentId': (string);
  'assign': (_worker_v1_Assign__Output | null);
  'replicaId': (string);
}
