// Original file: proto/worker/v1/worker.proto

import type * as grpc from '@grpc/grpc-js'
import type { MethodDefinition } from '@grpc/proto-loader'
import type { AgentFrame as _worker_v1_AgentFrame, AgentFrame__Output as _worker_v1_AgentFrame__Output } from '../../worker/v1/AgentFrame';
import type { ControlFrame as _worker_v1_ControlFrame, ControlFrame__Output as _worker_v1_ControlFrame__Output } from '../../worker/v1/ControlFrame';

export interface WorkerServiceClient extends grpc.Client {
  Connect(metadata: grpc.Metadata, options?: grpc.CallOptions): grpc.ClientDuplexStream<_worker_v1_AgentFrame, _worker_v1_ControlFrame__Output>;
  Connect(options?: grpc.CallOptions): grpc.ClientDuplexStream<_worker_v1_AgentFrame, _worker_v1_ControlFrame__Output>;
  connect(metadata: grpc.Metadata, options?: grpc.CallOptions): grpc.ClientDuplexStream<_worker_v1_AgentFrame, _worker_v1_ControlFrame__Output>;
  connect(options?: grpc.CallOptions): grpc.ClientDuplexStream<_worker_v1_AgentFrame, _worker_v1_ControlFrame__Output>;
  
}

export interface WorkerServiceHandlers extends grpc.UntypedServiceImplementation {
  Connect: grpc.handleBidiStreamingCall<_worker_v1_AgentFrame__Output, _worker_v1_ControlFrame>;
  
}

export interface WorkerServiceDefinition extends grpc.ServiceDefinition {
  Connect: MethodDefinition<_worker_v1_AgentFrame, _worker_v1_ControlFrame, _worker_v1_AgentFrame__Output, _worker_v1_ControlFrame__Output>
}
