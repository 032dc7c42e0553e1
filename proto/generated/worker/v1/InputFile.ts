// Original file: proto/worker/v1/worker.proto


export interface InputFile {
  'name'?: (string);
  'url'?: (string);
  'contentType'?: (string);
}

export interface InputFile__Output {
  'name': (string);
  'url': (string);
  'contentType': (string);
}
