import type * as grpc from '@grpc/grpc-js';
import type { EnumTypeDefinition, MessageTypeDefinition } from '@grpc/proto-loader';

import type { RelayCancel as _cluster_v1_RelayCancel, RelayCancel__Output as _cluster_v1_RelayCancel__Output } from './cluster/v1/RelayCancel';
import type { RelayCredit as _cluster_v1_RelayCredit, RelayCredit__Output as _cluster_v1_RelayCredit__Output } from './cluster/v1/RelayCredit';
import type { RelayEvent as _cluster_v1_RelayEvent, RelayEvent__Output as _cluster_v1_RelayEvent__Output } from './cluster/v1/RelayEvent';
import type { RelayEvents as _cluster_v1_RelayEvents, RelayEvents__Output as _cluster_v1_RelayEvents__Output } from './cluster/v1/RelayEvents';
import type { RelayJob as _cluster_v1_RelayJob, RelayJob__Output as _cluster_v1_RelayJob__Output } from './cluster/v1/RelayJob';
import type { RelayRequest as _cluster_v1_RelayRequest, RelayRequest__Output as _cluster_v1_RelayRequest__Output } from './cluster/v1/RelayRequest';
import type { RelayServiceClient as _cluster_v1_RelayServiceClient, RelayServiceDefinition as _cluster_v1_RelayServiceDefinition } from './cluster/v1/RelayService';
import type { Accepted as _worker_v1_Accepted, Accepted__Output as _worker_v1_Accepted__Output } from './worker/v1/Accepted';
import type { AdapterRef as _worker_v1_AdapterRef, AdapterRef__Output as _worker_v1_AdapterRef__Output } from './worker/v1/AdapterRef';
import type { AdapterResidency as _worker_v1_AdapterResidency, AdapterResidency__Output as _worker_v1_AdapterResidency__Output } from './worker/v1/AdapterResidency';
import type { AgentFrame as _worker_v1_AgentFrame, AgentFrame__Output as _worker_v1_AgentFrame__Output } from './worker/v1/AgentFrame';
import type { Assign as _worker_v1_Assign, Assign__Output as _worker_v1_Assign__Output } from './worker/v1/Assign';
import type { AssignBatch as _worker_v1_AssignBatch, AssignBatch__Output as _worker_v1_AssignBatch__Output } from './worker/v1/AssignBatch';
import type { Cancel as _worker_v1_Cancel, Cancel__Output as _worker_v1_Cancel__Output } from './worker/v1/Cancel';
import type { Chunk as _worker_v1_Chunk, Chunk__Output as _worker_v1_Chunk__Output } from './worker/v1/Chunk';
import type { Completed as _worker_v1_Completed, Completed__Output as _worker_v1_Completed__Output } from './worker/v1/Completed';
import type { ControlFrame as _worker_v1_ControlFrame, ControlFrame__Output as _worker_v1_ControlFrame__Output } from './worker/v1/ControlFrame';
import type { Credit as _worker_v1_Credit, Credit__Output as _worker_v1_Credit__Output } from './worker/v1/Credit';
import type { Drain as _worker_v1_Drain, Drain__Output as _worker_v1_Drain__Output } from './worker/v1/Drain';
import type { EmbeddingSpec as _worker_v1_EmbeddingSpec, EmbeddingSpec__Output as _worker_v1_EmbeddingSpec__Output } from './worker/v1/EmbeddingSpec';
import type { Engine as _worker_v1_Engine, Engine__Output as _worker_v1_Engine__Output } from './worker/v1/Engine';
import type { EngineSignals as _worker_v1_EngineSignals, EngineSignals__Output as _worker_v1_EngineSignals__Output } from './worker/v1/EngineSignals';
import type { Failed as _worker_v1_Failed, Failed__Output as _worker_v1_Failed__Output } from './worker/v1/Failed';
import type { Gpu as _worker_v1_Gpu, Gpu__Output as _worker_v1_Gpu__Output } from './worker/v1/Gpu';
import type { Heartbeat as _worker_v1_Heartbeat, Heartbeat__Output as _worker_v1_Heartbeat__Output } from './worker/v1/Heartbeat';
import type { Hello as _worker_v1_Hello, Hello__Output as _worker_v1_Hello__Output } from './worker/v1/Hello';
import type { InputFile as _worker_v1_InputFile, InputFile__Output as _worker_v1_InputFile__Output } from './worker/v1/InputFile';
import type { JobEvent as _worker_v1_JobEvent, JobEvent__Output as _worker_v1_JobEvent__Output } from './worker/v1/JobEvent';
import type { JobEventBatch as _worker_v1_JobEventBatch, JobEventBatch__Output as _worker_v1_JobEventBatch__Output } from './worker/v1/JobEventBatch';
import type { Output as _worker_v1_Output, Output__Output as _worker_v1_Output__Output } from './worker/v1/Output';
import type { Progress as _worker_v1_Progress, Progress__Output as _worker_v1_Progress__Output } from './worker/v1/Progress';
import type { Reject as _worker_v1_Reject, Reject__Output as _worker_v1_Reject__Output } from './worker/v1/Reject';
import type { StartupPhase as _worker_v1_StartupPhase, StartupPhase__Output as _worker_v1_StartupPhase__Output } from './worker/v1/StartupPhase';
import type { UploadTarget as _worker_v1_UploadTarget, UploadTarget__Output as _worker_v1_UploadTarget__Output } from './worker/v1/UploadTarget';
import type { Usage as _worker_v1_Usage, Usage__Output as _worker_v1_Usage__Output } from './worker/v1/Usage';
import type { Welcome as _worker_v1_Welcome, Welcome__Output as _worker_v1_Welcome__Output } from './worker/v1/Welcome';
import type { WorkerServiceClient as _worker_v1_WorkerServiceClient, WorkerServiceDefinition as _worker_v1_WorkerServiceDefinition } from './worker/v1/WorkerService';

type SubtypeConstructor<Constructor extends new (...args: any) => any, Subtype> = {
  new(...args: ConstructorParameters<Constructor>): Subtype;
};

export interface ProtoGrpcType {
  cluster: {
    v1: {
      RelayCancel: MessageTypeDefinition<_cluster_v1_RelayCancel, _cluster_v1_RelayCancel__Output>
      RelayCredit: MessageTypeDefinition<_cluster_v1_RelayCredit, _cluster_v1_RelayCredit__Output>
      RelayEvent: MessageTypeDefinition<_cluster_v1_RelayEvent, _cluster_v1_RelayEvent__Output>
      RelayEvents: MessageTypeDefinition<_cluster_v1_RelayEvents, _cluster_v1_RelayEvents__Output>
      RelayJob: MessageTypeDefinition<_cluster_v1_RelayJob, _cluster_v1_RelayJob__Output>
      RelayRequest: MessageTypeDefinition<_cluster_v1_RelayRequest, _cluster_v1_RelayRequest__Output>
      RelayService: SubtypeConstructor<typeof grpc.Client, _cluster_v1_RelayServiceClient> & { service: _cluster_v1_RelayServiceDefinition }
    }
  }
  worker: {
    v1: {
      Accepted: MessageTypeDefinition<_worker_v1_Accepted, _worker_v1_Accepted__Output>
      AdapterFormat: EnumTypeDefinition
      AdapterRef: MessageTypeDefinition<_worker_v1_AdapterRef, _worker_v1_AdapterRef__Output>
      AdapterResidency: MessageTypeDefinition<_worker_v1_AdapterResidency, _worker_v1_AdapterResidency__Output>
      AdapterState: EnumTypeDefinition
      AgentFrame: MessageTypeDefinition<_worker_v1_AgentFrame, _worker_v1_AgentFrame__Output>
      Assign: MessageTypeDefinition<_worker_v1_Assign, _worker_v1_Assign__Output>
      AssignBatch: MessageTypeDefinition<_worker_v1_AssignBatch, _worker_v1_AssignBatch__Output>
      Cancel: MessageTypeDefinition<_worker_v1_Cancel, _worker_v1_Cancel__Output>
      Chunk: MessageTypeDefinition<_worker_v1_Chunk, _worker_v1_Chunk__Output>
      Completed: MessageTypeDefinition<_worker_v1_Completed, _worker_v1_Completed__Output>
      ControlFrame: MessageTypeDefinition<_worker_v1_ControlFrame, _worker_v1_ControlFrame__Output>
      Credit: MessageTypeDefinition<_worker_v1_Credit, _worker_v1_Credit__Output>
      Drain: MessageTypeDefinition<_worker_v1_Drain, _worker_v1_Drain__Output>
      EmbeddingSpec: MessageTypeDefinition<_worker_v1_EmbeddingSpec, _worker_v1_EmbeddingSpec__Output>
      Engine: MessageTypeDefinition<_worker_v1_Engine, _worker_v1_Engine__Output>
      EngineHealth: EnumTypeDefinition
      EngineSignals: MessageTypeDefinition<_worker_v1_EngineSignals, _worker_v1_EngineSignals__Output>
      Failed: MessageTypeDefinition<_worker_v1_Failed, _worker_v1_Failed__Output>
      Gpu: MessageTypeDefinition<_worker_v1_Gpu, _worker_v1_Gpu__Output>
      Heartbeat: MessageTypeDefinition<_worker_v1_Heartbeat, _worker_v1_Heartbeat__Output>
      Hello: MessageTypeDefinition<_worker_v1_Hello, _worker_v1_Hello__Output>
      InputFile: MessageTypeDefinition<_worker_v1_InputFile, _worker_v1_InputFile__Output>
      JobEvent: MessageTypeDefinition<_worker_v1_JobEvent, _worker_v1_JobEvent__Output>
      JobEventBatch: MessageTypeDefinition<_worker_v1_JobEventBatch, _worker_v1_JobEventBatch__Output>
      JobKind: EnumTypeDefinition
      Output: MessageTypeDefinition<_worker_v1_Output, _worker_v1_Output__Output>
      Progress: MessageTypeDefinition<_worker_v1_Progress, _worker_v1_Progress__Output>
      Reject: MessageTypeDefinition<_worker_v1_Reject, _worker_v1_Reject__Output>
      StartupPhase: MessageTypeDefinition<_worker_v1_StartupPhase, _worker_v1_StartupPhase__Output>
      UploadTarget: MessageTypeDefinition<_worker_v1_UploadTarget, _worker_v1_UploadTarget__Output>
      Usage: MessageTypeDefinition<_worker_v1_Usage, _worker_v1_Usage__Output>
      Welcome: MessageTypeDefinition<_worker_v1_Welcome, _worker_v1_Welcome__Output>
      WorkerService: SubtypeConstructor<typeof grpc.Client, _worker_v1_WorkerServiceClient> & { service: _worker_v1_WorkerServiceDefinition }
    }
  }
}

