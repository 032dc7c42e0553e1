// Original file: proto/worker/v1/worker.proto

import type { Gpu as _worker_v1_Gpu, Gpu__Output as _worker_v1_Gpu__Output } from '../../worker/v1/Gpu';
import type { Engine as _worker_v1_Engine, Engine__Output as _worker_v1_Engine__Output } from '../../worker/v1/Engine';

export interface Hello {
  'protocolVersion'?: (number);
  'agentVersion'?: (string);
  'joinToken'?: (string);
  'gpus'?: (_worker_v1_Gpu)[];
  'engine'?: (_worker_v1_Engine | null);
  'models'?: (string)[];
  'maxConcurrency'?: (number);
  'agentId'?: (string);
  'priorityCapable'?: (boolean);
  'flowControl'?: (boolean);
  'preemptsBatchLines'?: (boolean);
  'maxLoras'?: (number);
  'maxCpuLoras'?: (number);
  'maxLoraRank'?: (number);
  'cachedModels'?: (string)[];
}

export interface Hello__Output {
  'protocolVersion': (number);
  'agentVersion': (string);
  'joinToken': (string);
  'gpus': (_worker_v1_Gpu__Output)[];
  'engine': (_worker_v1_Engine__Output | null);
  'models': (string)[];
  'maxConcurrency': (number);
  'agentId': (string);
  'priorityCapable': (boolean);
  'flowControl': (boolean);
  'preemptsBatchLines': (boolean);
  'maxLoras': (number);
  'maxCpuLoras': (number);
  'maxLoraRank': (number);
  'cachedModels': (string)[];
}
