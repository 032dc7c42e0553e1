// Original file: proto/cluster/v1/cluster.proto

import type { RelayEvent as _cluster_v1_RelayEvent, RelayEvent__Output as _cluster_v1_RelayEvent__Output } from '../../cluster/v1/RelayEvent';

export interface RelayEvents {
  'events'?: (_cluster_v1_RelayEvent)[];
}

export interface RelayEvents__Output {
  'events': (_cluster_v1_RelayEvent__Output)[];
}
