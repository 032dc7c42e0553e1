// Original file: proto/worker/v1/worker.proto


export interface Usage {
  'promptTokens'?: (number);
  'completionTokens'?: (number);
  'totalTokens'?: (number);
  'cachedTokens'?: (number);
}

export interface Usage__Output {
  'promptTokens': (number);
  'completionTokens': (number);
  'totalTokens': (number);
  'cachedTokens': (number);
}
