// Original file: proto/worker/v1/worker.proto


export interface Chunk {
  'data'?: (Buffer | Uint8Array | string);
}

export interface Chunk__Output {
  'data': (Buffer);
}
