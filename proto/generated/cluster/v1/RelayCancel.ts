// Original file: proto/cluster/v1/cluster.proto


export interface RelayCancel {
  'reason'?: (string);
}

export interface RelayCancel__Output {
  'reason': (string);
}
