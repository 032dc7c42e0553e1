// Original file: proto/cluster/v1/cluster.proto


export interface RelayCredit {
  'bytes'?: (number);
}

export interface RelayCredit__Output {
  'bytes': (number);
}
