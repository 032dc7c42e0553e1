import { GGUF_TYPE } from '../../../common/adapter-formats';
import { ggufHeader } from '../../support/gguf-header-writer';

/**
 * A GGUF LoRA adapter's header (v3, typed metadata, tensor infos; no tensor data: registration
 * reads headers only) with `rank` on each of its pairs, for `architecture`.
 */
export function loraGguf(options: { rank?: number; architecture?: string; alpha?: number; type?: string } = {}): Buffer {
  const rank = options.rank ?? 8;
  const metadata: Array<[string, number, unknown]> = [
    ['general.architecture', GGUF_TYPE.STRING, options.architecture ?? 'llama'], ['general.type', GGUF_TYPE.STRING, options.type ?? 'adapter'],
    ['adapter.type', GGUF_TYPE.STRING, 'lora'], ['adapter.lora.alpha', GGUF_TYPE.FLOAT32, options.alpha ?? 16],
  ];
  const tensors: Array<[string, number[]]> = [['blk.0.attn_q.weight.lora_a', [64, rank]], ['blk.0.attn_q.weight.lora_b', [rank, 64]]];
  return ggufHeader(metadata, tensors);
}
