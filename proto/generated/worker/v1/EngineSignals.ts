// Original file: proto/worker/v1/worker.proto


export interface EngineSignals {
  'running'?: (number);
  'waiting'?: (number);
  'kvCacheUsage'?: (number | string);
  'prefixCacheHitRate'?: (number | string);
  'prefixCacheHitRateKnown'?: (boolean);
}

export interface EngineSignals__Output {
  'running': (number);
  'waiting': (number);
  'kvCacheUsage': (number);
  'prefixCacheHitRate': (number);
  'prefixCacheHitRateKnown': (boolean);
}
