// Original file: proto/worker/v1/worker.proto


export interface Drain {
  'reason'?: (string);
}

export interface Drain__Output {
  'reason': (string);
}
