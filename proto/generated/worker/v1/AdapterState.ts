// Original file: proto/worker/v1/worker.proto

export const AdapterState = {
  ADAPTER_STATE_UNSPECIFIED: 'ADAPTER_STATE_UNSPECIFIED',
  ADAPTER_STATE_GPU: 'ADAPTER_STATE_GPU',
  ADAPTER_STATE_CPU: 'ADAPTER_STATE_CPU',
  ADAPTER_STATE_LOADING: 'ADAPTER_STATE_LOADING',
  ADAPTER_STATE_FAILED: 'ADAPTER_STATE_FAILED',
} as const;

export type AdapterState =
  | 'ADAPTER_STATE_UNSPECIFIED'
  | 0
  | 'ADAPTER_STATE_GPU'
  | 1
  | 'ADAPTER_STATE_CPU'
  | 2
  | 'ADAPTER_STATE_LOADING'
  | 3
  | 'ADAPTER_STATE_FAILED'
  | 4

export type AdapterState__Output = typeof AdapterState[keyof typeof AdapterState]
