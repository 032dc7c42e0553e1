// Original file: proto/worker/v1/worker.proto


export interface EmbeddingSpec {
  'dimensions'?: (number);
  'maxInputTokens'?: (number);
}

export interface EmbeddingSpec__Output {
  'dimensions': (number);
  'maxInputTokens': (number);
}
