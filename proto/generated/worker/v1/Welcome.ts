// Original file: proto/worker/v1/worker.proto


export interface Welcome {
  'replicaId'?: (string);
  'deploymentId'?: (string);
  'model'?: (string);
  'protocolVersion'?: (number);
  'heartbeatIntervalMs'?: (number);
  'priorityScheduling'?: (boolean);
}

export interface Welcome__Output {
  'replicaId': (string);
  'deploymentId': (string);
  'model': (string);
  'protocolVersion': (number);
  'heartbeatIntervalMs': (number);
  'priorityScheduling': (boolean);
}
