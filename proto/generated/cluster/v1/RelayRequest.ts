// Original file: proto/cluster/v1/cluster.proto

import type { RelayJob as _cluster_v1_RelayJob, RelayJob__Output as _cluster_v1_RelayJob__Output } from '../../cluster/v1/RelayJob';
import type { RelayCancel as _cluster_v1_RelayCancel, RelayCancel__Output as _cluster_v1_RelayCancel__Output } from '../../cluster/v1/RelayCancel';
import type { RelayCredit as _cluster_v1_RelayCredit, RelayCredit__Output as _cluster_v1_RelayCredit__Output } from '../../cluster/v1/RelayCredit';

export interface RelayRequest {
  'relayJobId'?: (string);
  'job'?: (_cluster_v1_RelayJob | null);
  'cancel'?: (_cluster_v1_RelayCancel | null);
  'credit'?: (_cluster_v1_RelayCredit | null);
  'request'?: "job"|"cancel"|"credit";
}

export interface RelayRequest__Output {
  'relayJobId': (string);
  'job'?: (_cluster_v1_RelayJob__Output | null);
  'cancel'?: (_cluster_v1_RelayCancel__Output | null);
  'credit'?: (_cluster_v1_RelayCredit__Output | null);
  'request'?: "job"|"cancel"|"credit";
}
