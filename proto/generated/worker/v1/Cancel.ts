// Original file: proto/worker/v1/worker.proto


export interface Cancel {
  'jobId'?: (string);
  'reason'?: (string);
}

export interface Cancel__Output {
  'jobId': (string);
  'reason': (string);
}
