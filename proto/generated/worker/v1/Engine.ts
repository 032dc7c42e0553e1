// Original file: proto/worker/v1/worker.proto


export interface Engine {
  'kind'?: (string);
  'version'?: (string);
  'url'?: (string);
}

export interface Engine__Output {
  'kind': (string);
  'version': (string);
  'url': (string);
}
