// Original file: proto/worker/v1/worker.proto


export interface Reject {
  'code'?: (string);
  'message'?: (string);
}

export interface Reject__Output {
  'code': (string);
  'message': (string);
}
