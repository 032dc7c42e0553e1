// Original file: proto/cluster/v1/cluster.proto

import type * as grpc from '@grpc/grpc-js'
import type { MethodDefinition } from '@grpc/proto-loader'
import type { RelayEvents as _cluster_v1_RelayEvents, RelayEvents__Output as _cluster_v1_RelayEvents__Output } from '../../cluster/v1/RelayEvents';
import type { RelayRequest as _cluster_v1_RelayRequest, RelayRequest__Output as _cluster_v1_RelayRequest__Output } from '../../cluster/v1/RelayRequest';

export interface RelayServiceClient extends grpc.Client {
  Run(metadata: grpc.Metadata, options?: grpc.CallOptions): grpc.ClientDuplexStream<_cluster_v1_RelayRequest, _cluster_v1_RelayEvents__Output>;
  Run(options?: grpc.CallOptions): grpc.ClientDuplexStream<_cluster_v1_RelayRequest, _cluster_v1_RelayEvents__Output>;
  run(metadata: grpc.Metadata, options?: grpc.CallOptions): grpc.ClientDuplexStream<_cluster_v1_RelayRequest, _cluster_v1_RelayEvents__Output>;
  run(options?: grpc.CallOptions): grpc.ClientDuplexStream<_cluster_v1_RelayRequest, _cluster_v1_RelayEvents__Output>;
  
}

export interface RelayServiceHandlers extends grpc.UntypedServiceImplementation {
  Run: grpc.handleBidiStreamingCall<_cluster_v1_RelayRequest__Output, _cluster_v1_RelayEvents>;
  
}

export interface RelayServiceDefinition extends grpc.ServiceDefinition {
  Run: MethodDefinition<_cluster_v1_RelayRequest, _cluster_v1_RelayEvents, _cluster_v1_RelayRequest__Output, _cluster_v1_RelayEvents__Output>
}
