// Original file: proto/worker/v1/worker.proto


export interface Progress {
  'percent'?: (number);
  'stage'?: (string);
}

export interface Progress__Output {
  'percent': (number);
  'stage': (string);
}
