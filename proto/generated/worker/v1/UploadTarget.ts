// Original file: proto/worker/v1/worker.proto


export interface UploadTarget {
  'url'?: (string);
  'headers'?: ({[key: string]: string});
  'objectKey'?: (string);
  'contentType'?: (string);
}

export interface UploadTarget__Output {
  'url': (string);
  'headers': ({[key: string]: string});
  'objectKey': (string);
  'contentType': (string);
}
