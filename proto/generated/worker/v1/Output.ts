// Original file: proto/worker/v1/worker.proto


export interface Output {
  'data'?: (Buffer | Uint8Array | string);
  'contentType'?: (string);
  'objectKey'?: (string);
}

export interface Output__Output {
  'data': (Buffer);
  'contentType': (string);
  'objectKey': (string);
}
