/** Reading LoRA adapter files (GGUF, PEFT tar, safetensors) without loading them: docs/adapters.md. */
export { AdapterFormatError } from './adapter-format-error';
export { inspectAdapter, type AdapterFacts, type InspectableFormat, type LoraTensorPair } from './inspect-adapter';
export { readGgufHeader, GGUF_TYPE, type GgufHeader, type GgufTensorInfo, type GgufValue } from './gguf-header';
export { readSafetensorsHeader, type SafetensorsTensor } from './safetensors-header';
export { tarFiles } from './tar-files';
