// Original file: proto/worker/v1/worker.proto


export interface Credit {
  'jobId'?: (string);
  'bytes'?: (number);
}

export interface Credit__Output {
  'jobId': (string);
  'bytes': (number);
}
