// Original file: proto/worker/v1/worker.proto


export interface Accepted {
  'queued'?: (boolean);
}

export interface Accepted__Output {
  'queued': (boolean);
}
