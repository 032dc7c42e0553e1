// Original file: proto/worker/v1/worker.proto

import type { JobKind as _worker_v1_JobKind, JobKind__Output as _worker_v1_JobKind__Output } from '../../worker/v1/JobKind';
import type { InputFile as _worker_v1_InputFile, InputFile__Output as _worker_v1_InputFile__Output } from '../../worker/v1/InputFile';
import type { UploadTarget as _worker_v1_UploadTarget, UploadTarget__Output as _worker_v1_UploadTarget__Output } from '../../worker/v1/UploadTarget';
import type { EmbeddingSpec as _worker_v1_EmbeddingSpec, EmbeddingSpec__Output as _worker_v1_EmbeddingSpec__Output } from '../../worker/v1/EmbeddingSpec';
import type { AdapterRef as _worker_v1_AdapterRef, AdapterRef__Output as _worker_v1_AdapterRef__Output } from '../../worker/v1/AdapterRef';
import type { Long } from '@grpc/proto-loader';

export interface Assign {
  'jobId'?: (string);
  'kind'?: (_worker_v1_JobKind);
  'deadlineUnixMs'?: (number | string | Long);
  'body'?: (Buffer | Uint8Array | string);
  'stream'?: (boolean);
  'includeUsage'?: (boolean);
  'model'?: (string);
  'inputs'?: (_worker_v1_InputFile)[];
  'uploads'?: (_worker_v1_UploadTarget)[];
  'inlineOutputs'?: (boolean);
  'guest'?: (boolean);
  'embedding'?: (_worker_v1_EmbeddingSpec | null);
  'streamWindowBytes'?: (number);
  'batch'?: (boolean);
  'cacheSalt'?: (string);
  'traceparent'?: (string);
  'adapter'?: (_worker_v1_AdapterRef | null);
}

export interface Assign__Output {
  'jobId': (string);
  'kind': (_worker_v1_JobKind__Output);
  'deadlineUnixMs': (number);
  'body': (Buffer);
  'stream': (boolean);
  'includeUsage': (boolean);
  'model': (string);
  'inputs': (_worker_v1_InputFile__Output)[];
  'uploads': (_worker_v1_UploadTarget__Output)[];
  'inlineOutputs': (boolean);
  'guest': (boolean);
  'embedding': (_worker_v1_EmbeddingSpec__Output | null);
  'streamWindowBytes': (number);
  'batch': (boolean);
  'cacheSalt': (string);
  'traceparent': (string);
  'adapter': (_worker_v1_AdapterRef__Output | null);
}
